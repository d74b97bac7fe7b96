// A whole memmap directory written by someone else: the input is cut into the files of a small
// tree (meta.json, next/meta.json, x.memmap, next/y.memmap) at each "\xff\xfe\xfd\xfc", then loaded
// and every leaf read, so that sizes the files and meta.json disagree on are found.
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz_target.hpp"
#include "tensortree/memmap.hpp"
#include "tensortree/tree.hpp"

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kCut = "\xff\xfe\xfd\xfc";
constexpr std::array<std::string_view, 4> kFiles = {"meta.json", "next/meta.json", "x.memmap", "next/y.memmap"};

// One directory per process, emptied for every input.
const fs::path& scratch() {
  static const fs::path dir = fs::temp_directory_path() / ("tt_fuzz_memmap_" + std::to_string(::getpid()));
  return dir;
}

void write_files(std::string_view input) {
  fs::remove_all(scratch());
  fs::create_directories(scratch() / "next");
  for (const std::string_view name : kFiles) {
    const std::size_t cut = input.find(kCut);
    std::ofstream(scratch() / name, std::ios::binary) << input.substr(0, cut);
    if (cut == std::string_view::npos) return;  // the files not reached stay missing
    input.remove_prefix(cut + kCut.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write_files(std::string_view(reinterpret_cast<const char*>(data), size));
  // The mapped load and the load into one block must both end in a typed error or a whole tree.
  int status = 0;
  for (const auto mode : {tensortree::MemmapMode::ReadOnly, tensortree::MemmapMode::Copy}) {
    status |= fuzz::expect_typed_errors([mode] {
      const tensortree::TensorTree tree = tensortree::TensorTree::load_memmap(scratch(), {.mode = mode});
      std::uint64_t checksum = 0;  // touches every byte of every leaf
      tree.for_each_leaf([&](const tensortree::Path&, const tensortree::Tensor& leaf) {
        const auto* bytes = static_cast<const unsigned char*>(leaf.data_ptr());
        for (std::size_t i = 0; i < leaf.nbytes(); ++i) checksum += bytes[i];
      });
      // An empty asm that "reads" the sum, so the loop that touches the pages is not optimised away.
      asm volatile("" : : "r"(checksum));
    });
  }
  return status;
}

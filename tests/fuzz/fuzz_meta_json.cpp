// One node's meta.json, as a file in a directory someone else wrote.
#include <string_view>

#include "fuzz_target.hpp"
#include "memmap/memmap_meta.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return fuzz::expect_typed_errors([&] {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    (void)tensortree::detail::parse_node_meta(text, "fuzz/meta.json");
  });
}

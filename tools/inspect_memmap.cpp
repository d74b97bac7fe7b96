// inspect_memmap: prints a saved tree's structure (keys, dtypes, shapes, bytes, batch sizes) from its
// meta.json files and the leaf files' sizes, without reading any data. Files of the wrong size or
// missing are flagged; the exit status is 1 when the tree would not load.
//
//   inspect_memmap DIR [--sub next.obs]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "tensortree/memmap.hpp"

using namespace tensortree;

namespace {

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

std::string display_key(const Path& path) {
  if (path.empty()) return "<root>";
  std::string key = path.back().empty() ? std::string("''") : path.back();
  return key;
}

void print_entry(const MemmapEntryInfo& entry) {
  const std::string indent(2 * entry.path.size(), ' ');
  if (entry.is_node) {
    std::printf("%s%s/  batch_size %s\n", indent.c_str(), display_key(entry.path).c_str(),
                shape_str(entry.shape).c_str());
    return;
  }
  std::string status;
  if (entry.file_bytes < 0 && entry.nbytes > 0) {  // a leaf of no bytes needs no file
    status = "  !! file missing or not a regular file";
  } else if (static_cast<std::uint64_t>(entry.file_bytes) != entry.nbytes) {
    status = "  !! file holds ";
    status += std::to_string(entry.file_bytes);
    status += " bytes";
  }
  std::printf("%s%-24s %-14s %-18s %12s%s\n", indent.c_str(), display_key(entry.path).c_str(),
              std::string(dtype_name(entry.dtype)).c_str(), shape_str(entry.shape).c_str(),
              human_bytes(entry.nbytes).c_str(), status.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Print a memmap tree's structure without reading its data"};
  std::string dir;
  std::string sub;
  app.add_option("dir", dir, "directory written by memmap_ (or TensorDict.memmap_)")->required();
  app.add_option("--sub", sub, "only the sub-tree at this dotted path");
  CLI11_PARSE(app, argc, argv);

  try {
    const MemmapListing listing = list_memmap(dir, parse_path(sub));
    std::uint64_t total = 0;
    std::size_t leaves = 0;
    std::size_t nodes = 0;
    for (const MemmapEntryInfo& entry : listing.entries) {
      print_entry(entry);
      if (entry.is_node) {
        ++nodes;
      } else {
        ++leaves;
        total += entry.nbytes;
      }
    }
    std::printf("%zu leaves in %zu nodes, %s (%llu bytes)\n", leaves, nodes, human_bytes(total).c_str(),
                static_cast<unsigned long long>(total));
    for (const std::string& problem : listing.problems) std::fprintf(stderr, "problem: %s\n", problem.c_str());
    return listing.problems.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inspect_memmap: %s\n", e.what());
    return 1;
  }
}

#include "transport/shm/shareable_memory.hpp"

#include <string>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

[[noreturn]] void no_streaming(const ShareableMemory& memory) {
  throw NotSupported(fmt::format("node-local transport: {} memory is not streamed", memory.name()));
}

}  // namespace

void ShareableMemory::start_stream(const ExportedRegion&) { no_streaming(*this); }

void ShareableMemory::copy_in_streamed(const Tensor&, const ExportedRegion&, std::size_t) { no_streaming(*this); }

std::uint64_t ShareableMemory::streamed_bytes(const ImportedRegion&) { no_streaming(*this); }

void ShareableMemory::copy_out_part(const ImportedRegion&, std::uint64_t, const Tensor&, std::uint64_t, std::uint64_t) {
  no_streaming(*this);
}

}  // namespace tensortree::detail

#include "memmap/device_upload.hpp"

#include <oneapi/tbb/parallel_pipeline.h>

#include <algorithm>
#include <cstring>

#include "core/checked_math.hpp"
#include "core/cuda_api.hpp"
#include "core/pinned_pool.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

// ---- UploadImage -------------------------------------------------------------------------------

std::size_t UploadImage::add(const Tensor& host) {
  if (host.device().is_cuda() || !host.is_contiguous()) {
    throw InvalidArgument("upload: a leaf to upload must be contiguous and on the CPU");
  }
  const std::size_t offset = total_;
  const std::size_t bytes = host.nbytes();
  if (bytes == 0) return offset;
  const auto end = checked_add<std::uint64_t>(offset, bytes);
  const auto padded = end ? checked_align_up(*end, kAlignment) : std::nullopt;
  if (!padded || *padded > SIZE_MAX) throw CorruptData("upload: the tree's leaves hold more bytes than memory can");
  pieces_.push_back({offset, bytes, static_cast<const std::byte*>(host.data_ptr()), host});
  total_ = static_cast<std::size_t>(*padded);
  return offset;
}

void UploadImage::read(std::size_t offset, std::span<std::byte> out) const {
  const std::size_t end = offset + out.size();
  // The first piece that ends after `offset`; pieces lie in order without overlapping.
  auto piece = std::upper_bound(pieces_.begin(), pieces_.end(), offset,
                                [](std::size_t at, const Piece& p) { return at < p.offset + p.bytes; });
  std::size_t written = offset;  // block bytes of `out` filled so far
  for (; piece != pieces_.end() && piece->offset < end; ++piece) {
    const std::size_t from = std::max(offset, piece->offset);
    const std::size_t to = std::min(end, piece->offset + piece->bytes);
    std::memset(out.data() + (written - offset), 0, from - written);
    std::memcpy(out.data() + (from - offset), piece->data + (from - piece->offset), to - from);
    written = to;
  }
  std::memset(out.data() + (written - offset), 0, end - written);
}

// ---- the pipeline --------------------------------------------------------------------------------

namespace {

// Pinned buffers in the ring: chunks being read or crossing the bus at once. Four keep the bus
// busy while three reader threads fill the next chunks.
constexpr std::size_t kSlots = 4;
constexpr std::size_t kMinChunk = 4096;

struct Chunk {
  std::size_t offset = 0;
  std::size_t bytes = 0;
  std::size_t slot = 0;
};

// The pinned buffers, one stream and one event per buffer marking the last copy out of it. Waits
// for every copy before the buffers go back to the pool, also when the pipeline throws.
class StagingRing {
 public:
  StagingRing(int device, std::size_t chunk_bytes, std::size_t slots) : stream_(device) {
    for (std::size_t i = 0; i < slots; ++i) {
      buffers_.push_back(PinnedPool::shared().acquire(chunk_bytes));
      events_.emplace_back(device);
    }
  }
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;
  ~StagingRing() {
    for (const cuda::CopyEvent& event : events_) event.wait_quietly();
  }

  std::byte* buffer(std::size_t slot) const { return buffers_[slot].data(); }
  // Blocks until the last copy out of the slot's buffer has finished, so it may be filled again.
  void wait_free(std::size_t slot) const { events_[slot].wait(); }
  void copy_out(std::byte* dst, const Chunk& chunk) {
    stream_.copy_async(dst, buffer(chunk.slot), chunk.bytes);
    events_[chunk.slot].record(stream_);
  }
  void finish() const {
    for (const cuda::CopyEvent& event : events_) event.wait();
  }

 private:
  cuda::CopyStream stream_;
  std::vector<PinnedLease> buffers_;
  std::vector<cuda::CopyEvent> events_;
};

// Copies the whole image to `block`: chunks taken in order, read in parallel into the ring's
// buffers, and queued on the stream in order. At most `slots` chunks are alive, so chunk i reuses
// the buffer of chunk i - slots, whose copy was queued before chunk i was taken.
void copy_image(const UploadImage& image, std::byte* block, int device, std::size_t chunk_bytes) {
  const std::size_t total = image.total_bytes();
  if (total == 0) return;
  const std::size_t chunk = std::min(total, std::max(chunk_bytes, kMinChunk));
  const std::size_t chunks = total / chunk + (total % chunk != 0);
  const std::size_t slots = std::min(kSlots, chunks);
  StagingRing ring(device, chunk, slots);
  std::size_t next = 0;
  const auto take = [&](oneapi::tbb::flow_control& control) -> Chunk {
    if (next == chunks) {
      control.stop();
      return {};
    }
    const std::size_t i = next++;
    const Chunk taken{i * chunk, std::min(chunk, total - i * chunk), i % slots};
    ring.wait_free(taken.slot);
    return taken;
  };
  const auto read = [&](Chunk c) {
    image.read(c.offset, {ring.buffer(c.slot), c.bytes});
    return c;
  };
  const auto send = [&](Chunk c) { ring.copy_out(block + c.offset, c); };
  using oneapi::tbb::filter_mode;
  using oneapi::tbb::make_filter;
  oneapi::tbb::parallel_pipeline(slots, make_filter<void, Chunk>(filter_mode::serial_in_order, take) &
                                            make_filter<Chunk, Chunk>(filter_mode::parallel, read) &
                                            make_filter<Chunk, void>(filter_mode::serial_in_order, send));
  ring.finish();
}

}  // namespace

TensorTree upload_tree(const TensorTree& host_tree, Device device, std::size_t chunk_bytes) {
  UploadImage image;
  std::vector<std::size_t> offsets;
  host_tree.for_each_leaf([&](const Path&, const Tensor& leaf) { offsets.push_back(image.add(leaf)); });
  if (image.total_bytes() == 0) return host_tree.to(device);  // only empty leaves: nothing to copy
  const StoragePtr block = Storage::allocate(image.total_bytes(), device);
  copy_image(image, block->data(), device.index(), chunk_bytes);
  std::size_t next = 0;
  return host_tree.apply([&](const Tensor& leaf) {
    const std::size_t offset = offsets[next++];
    if (leaf.nbytes() == 0) return Tensor::empty(leaf.shape(), {leaf.dtype(), device});
    return Tensor(block, offset, leaf.dtype(), leaf.shape(), contiguous_strides(leaf.shape()));
  });
}

}  // namespace tensortree::detail

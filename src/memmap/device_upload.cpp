#include "memmap/device_upload.hpp"

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/cuda_api.hpp"
#include "core/pinned_pool.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

// ---- the copy loop -------------------------------------------------------------------------------

namespace {

// Chunks read at once, one thread each: page-cache copies run at a few GB/s per thread, so it takes
// several to keep up with the bus (55 GB/s on an H100's PCIe 5), up to one per core.
constexpr std::size_t kMaxLanes = 8;
constexpr std::size_t kMinChunk = 4096;

std::size_t reader_lanes() {
  const std::size_t cores = std::thread::hardware_concurrency();
  return std::clamp<std::size_t>(cores, 2, kMaxLanes);
}

// Two windows of pinned buffers, `lanes` each, and one event per window marking its last copy. Waits
// for every queued copy before the buffers go back to the pool, also when a copy fails to queue.
class StagingWindows {
 public:
  StagingWindows(int device, std::size_t chunk_bytes, std::size_t lanes) : stream_(device), lanes_(lanes) {
    for (std::size_t i = 0; i < 2 * lanes; ++i) buffers_.push_back(PinnedPool::shared().acquire(chunk_bytes));
    for (cuda::CopyEvent& event : events_) event = cuda::CopyEvent(device);
  }
  StagingWindows(const StagingWindows&) = delete;
  StagingWindows& operator=(const StagingWindows&) = delete;
  ~StagingWindows() { stream_.wait_quietly(); }

  std::byte* buffer(std::size_t window, std::size_t lane) const { return buffers_[window * lanes_ + lane].data(); }
  // Blocks until the window's copies have finished, so its buffers may be filled again.
  void wait_free(std::size_t window) const { events_[window].wait(); }
  void copy_out(std::byte* dst, std::size_t window, std::size_t lane, std::size_t bytes) const {
    stream_.copy_async(dst, buffer(window, lane), bytes);
  }
  void mark_end(std::size_t window) { events_[window].record(stream_); }
  void finish() const { stream_.wait(); }

 private:
  cuda::CopyStream stream_;
  std::size_t lanes_;
  std::vector<PinnedLease> buffers_;
  cuda::CopyEvent events_[2];
};

// Copies the whole image to `block`, a window of chunks at a time: threads read one window out of the
// files while the stream carries the window before it to the device. Every CUDA call stays on the
// calling thread, whose current device the caller chose; the reader threads never touch CUDA.
void copy_image(const BlockImage& image, std::byte* block, int device, std::size_t chunk_bytes) {
  const std::size_t total = image.total_bytes();  // upload_image copies no empty image
  const std::size_t chunk = std::min(total, std::max(chunk_bytes, kMinChunk));
  const std::size_t chunks = total / chunk + (total % chunk != 0);
  const std::size_t lanes = std::min(reader_lanes(), chunks);
  StagingWindows windows(device, chunk, lanes);
  const auto bytes_of = [&](std::size_t i) { return std::min(chunk, total - i * chunk); };
  for (std::size_t first = 0, window = 0; first < chunks; first += lanes, window ^= 1) {
    const std::size_t count = std::min(lanes, chunks - first);
    windows.wait_free(window);  // the copies of two windows ago
    oneapi::tbb::parallel_for(std::size_t{0}, count, [&](std::size_t lane) {
      const std::size_t i = first + lane;
      image.read(i * chunk, {windows.buffer(window, lane), bytes_of(i)});
    });
    for (std::size_t lane = 0; lane < count; ++lane) {
      windows.copy_out(block + (first + lane) * chunk, window, lane, bytes_of(first + lane));
    }
    windows.mark_end(window);
  }
  windows.finish();
}

}  // namespace

StoragePtr upload_image(const BlockImage& image, Device device, std::size_t chunk_bytes) {
  const StoragePtr block = Storage::allocate(image.total_bytes(), device);
  if (image.total_bytes() > 0) copy_image(image, block->data(), device.index(), chunk_bytes);
  return block;
}

}  // namespace tensortree::detail

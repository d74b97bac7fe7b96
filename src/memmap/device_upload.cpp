#include "memmap/device_upload.hpp"

#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <cstring>
#include <thread>
#include <vector>

#include "core/cuda_api.hpp"
#include "core/pinned_pool.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

// ---- the copy loop -------------------------------------------------------------------------------

namespace {

// Chunks read at once, one thread each: page-cache copies run at a few GB/s per thread, so it takes
// many to keep up with the bus (55 GB/s on an H100's PCIe 5), up to one per core.
constexpr std::size_t kMaxReaders = 16;
constexpr std::size_t kMinChunk = 4096;
// Pinned buffers per reader: one being read into while another's copy crosses the bus.
constexpr std::size_t kBuffersPerReader = 2;

std::size_t reader_count() {
  const std::size_t cores = std::thread::hardware_concurrency();
  return std::clamp<std::size_t>(cores, 2, kMaxReaders);
}

// A ring of pinned buffers, each with the event that marks its last copy to the device, and the
// reads in flight into them. Chunk i goes through buffer i % size(). Waits for every read and every
// queued copy before the buffers go back to the pool, also when a read or a copy fails.
class StagingRing {
 public:
  StagingRing(int device, std::size_t chunk_bytes, std::size_t buffers)
      : stream_(device), slots_(buffers) {
    for (Slot& slot : slots_) {
      slot.buffer = PinnedPool::shared().acquire(chunk_bytes);
      slot.copied = cuda::CopyEvent(device);
    }
  }
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;
  ~StagingRing() {
    readers_.wait();
    stream_.wait_quietly();
  }

  std::size_t size() const { return slots_.size(); }

  // Starts reading chunk `index` (`bytes` at `offset` of the image) into its buffer on a reader
  // thread; the buffer's previous copy must have finished (wait_copied).
  void start_read(const BlockImage& image, std::size_t index, std::size_t offset, std::size_t bytes) {
    Slot& slot = slot_of(index);
    slot.read.store(kReading, std::memory_order_relaxed);
    readers_.run([&image, &slot, offset, bytes] {
      try {
        image.read(offset, {slot.buffer.data(), bytes});
        slot.read.store(kRead, std::memory_order_release);
      } catch (...) {
        slot.error = std::current_exception();
        slot.read.store(kFailed, std::memory_order_release);
      }
    });
  }
  // Waits for chunk `index`'s read (yielding: it takes a page-cache copy of one chunk), then queues
  // its copy to `dst` and marks the buffer's end. Rethrows what the read threw.
  void copy_when_read(std::size_t index, std::byte* dst, std::size_t bytes) {
    Slot& slot = slot_of(index);
    int state = kReading;
    while ((state = slot.read.load(std::memory_order_acquire)) == kReading) std::this_thread::yield();
    if (state == kFailed) std::rethrow_exception(slot.error);
    stream_.copy_async(dst, slot.buffer.data(), bytes);
    slot.copied.record(stream_);
  }
  // Blocks until chunk `index`'s copy to the device has finished, so its buffer may be read into.
  void wait_copied(std::size_t index) const { slot_of(index).copied.wait(); }
  void finish() const { stream_.wait(); }

 private:
  static constexpr int kReading = 0;
  static constexpr int kRead = 1;
  static constexpr int kFailed = 2;
  struct Slot {
    PinnedLease buffer;
    cuda::CopyEvent copied;
    std::atomic<int> read{kRead};
    std::exception_ptr error;
  };
  Slot& slot_of(std::size_t index) { return slots_[index % slots_.size()]; }
  const Slot& slot_of(std::size_t index) const { return slots_[index % slots_.size()]; }

  cuda::CopyStream stream_;
  std::vector<Slot> slots_;
  oneapi::tbb::task_group readers_;  // last: its reads end before the buffers go
};

// Copies the whole image to `block` a chunk at a time: reader threads keep reading the next chunks
// out of the files into free buffers while the stream carries the chunks read before them to the
// device, with no step at which every reader waits for the slowest. Every CUDA call stays on the
// calling thread, whose current device the caller chose; the reader threads never touch CUDA.
void copy_image(const BlockImage& image, std::byte* block, int device, std::size_t chunk_bytes) {
  const std::size_t total = image.total_bytes();  // upload_image copies no empty image
  const std::size_t chunk = std::min(total, std::max(chunk_bytes, kMinChunk));
  const std::size_t chunks = total / chunk + (total % chunk != 0);
  const auto bytes_of = [&](std::size_t i) { return std::min(chunk, total - i * chunk); };
  StagingRing ring(device, chunk, std::min(kBuffersPerReader * reader_count(), chunks));
  for (std::size_t i = 0; i < ring.size(); ++i) ring.start_read(image, i, i * chunk, bytes_of(i));
  for (std::size_t i = 0; i < chunks; ++i) {
    ring.copy_when_read(i, block + i * chunk, bytes_of(i));
    // The chunk before this one had its copy queued first: once it is done (this one queued
    // behind it keeps the bus busy meanwhile), its buffer takes the next chunk to read.
    const std::size_t refill = i - 1 + ring.size();
    if (i > 0 && refill < chunks) {
      ring.wait_copied(i - 1);
      ring.start_read(image, refill, refill * chunk, bytes_of(refill));
    }
  }
  // A single buffer (a one-chunk image) was never refilled; the others were as they came free.
  ring.finish();
}

}  // namespace

StoragePtr upload_image(const BlockImage& image, Device device, std::size_t chunk_bytes) {
  const StoragePtr block = Storage::allocate(image.total_bytes(), device);
  if (image.total_bytes() > 0) copy_image(image, block->data(), device.index(), chunk_bytes);
  return block;
}

}  // namespace tensortree::detail

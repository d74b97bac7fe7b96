// ShareableMemory: what the node-local transport needs from one kind of memory: regions this
// process writes and its peers on the node open. Two implementations, one protocol over them
// (NodeLocalBackend): host memory in sealed memfds (HostShareableMemory) and CUDA device memory
// through CUDA IPC (CudaShareableMemory).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "tensortree/device.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::detail {

// How a peer opens a region: the memory kind's own description (a memfd's address; a CUDA IPC
// memory handle). Peer bytes: checked by whoever opens it.
inline constexpr std::size_t kRegionHandleBytes = 128;
using RegionHandle = std::array<std::byte, kRegionHandleBytes>;

// A region this process exports: the memory to write, and how a peer opens it.
struct ExportedRegion {
  StoragePtr storage;  // null: nothing exported
  RegionHandle handle{};

  explicit operator bool() const { return storage != nullptr; }
};

// A region streamed into (FrameKind::Streamed) starts with this many bytes holding the count of
// payload bytes written so far; the payload follows, on a cache line of its own.
inline constexpr std::size_t kProgressBytes = 64;

// A peer's region, opened here.
class ImportedRegion {
 public:
  virtual ~ImportedRegion() = default;
  // Bytes [0, mapped_bytes()) of the region are readable here.
  virtual std::uint64_t mapped_bytes() const = 0;
};

class ShareableMemory {
 public:
  virtual ~ShareableMemory() = default;

  virtual std::string_view name() const = 0;
  virtual Device device() const = 0;

  // A new region of `nbytes`.
  virtual ExportedRegion allocate(std::size_t nbytes) = 0;
  // `storage` as peers can open it without a copy, when this memory made it (allocate); an empty
  // region otherwise.
  virtual ExportedRegion export_storage(const StoragePtr& storage) = 0;
  // Copies `source` (contiguous, on device()) to the start of `region`, visibly to a peer's
  // copy_out.
  virtual void copy_in(const Tensor& source, const ExportedRegion& region) = 0;
  // Makes what this process wrote into an exported storage visible to a peer's copy_out.
  virtual void publish(const ExportedRegion& region) = 0;

  // A peer's region from its handle, with at least `nbytes` readable. The handle is the peer's
  // claim: CorruptData when it does not describe such a region.
  virtual std::shared_ptr<ImportedRegion> open(const RegionHandle& handle, std::uint64_t nbytes) = 0;
  // Copies destination.nbytes() bytes from `offset` of `region` into `destination` (contiguous, on
  // device()); done on return, so the peer may write the region again.
  virtual void copy_out(const ImportedRegion& region, std::uint64_t offset, const Tensor& destination) = 0;

  // Streaming, where this memory supports it (host memory; the others throw NotSupported).
  virtual bool streams() const { return false; }
  // Sets `region`'s progress count to 0, before a peer learns of the stream.
  virtual void start_stream(const ExportedRegion& region);
  // Copies `source` (contiguous) to kProgressBytes into `region` in pieces of `chunk` bytes, and
  // after each piece publishes how many bytes are in place.
  virtual void copy_in_streamed(const Tensor& source, const ExportedRegion& region, std::size_t chunk);
  // The count a peer published last in `region` (peer bytes: the caller checks them).
  virtual std::uint64_t streamed_bytes(const ImportedRegion& region);
  // Copies payload bytes [begin, end) from `offset` of `region` to the same bytes of `destination`.
  virtual void copy_out_part(const ImportedRegion& region, std::uint64_t offset, const Tensor& destination,
                             std::uint64_t begin, std::uint64_t end);
};

}  // namespace tensortree::detail

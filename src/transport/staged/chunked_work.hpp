// ChunkedWork: one StagedBackend operation cut into chunks of StagedBackendOptions::chunk_bytes,
// each chunk its own host operation (see staged_backend.hpp for why and how chunks match).
//
// An operation reads one tensor of the caller's (its input side, copied to pinned memory before
// each chunk's host operation is posted) and writes one (its output side, copied back as each
// chunk's host operation completes); either may be absent, and both may be one tensor (in-place
// reductions). A side holds `rows` equal pieces one after another: one for point to point, the
// root of a broadcast or an all-reduce; the group's size for the gathered side of all_gather,
// gather, scatter and reduce_scatter, where rank r's piece starts at r * piece. Chunk i covers
// the same elements [i * chunk, i * chunk + length) of every piece. In pinned memory the chunk's
// rows lie next to each other (the whole side is chunk-major), so that each chunk's host operation
// sees the one contiguous buffer a whole-tensor operation would have seen: rank by rank, each
// rank's part of the chunk. On a device, a chunk of several rows moves in one strided copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "comm/engine.hpp"
#include "transport/staged/staged_backend.hpp"

namespace tensortree::detail {

// A pinned host tensor from the process's pool: staging allocates no page-locked memory once the
// pool holds buffers of the sizes in use. The buffer returns to the pool when the last tensor or
// Work using it ends.
Tensor pinned_tensor(DType dtype, Shape shape, std::size_t nbytes);

// A contiguous tensor as one dimension of its own elements.
Tensor flat(const Tensor& tensor);

class ChunkedWork final : public Work {
 public:
  // One side of the operation: the caller's tensor (contiguous, one dimension), its pinned copy
  // of the same length (chunk-major, see above), and how many pieces it holds.
  struct Side {
    Tensor user;
    Tensor pinned;
    std::int64_t rows = 1;
  };
  // A side of `rows` pieces for `user` (one dimension, contiguous), with a fresh pinned buffer.
  static Side staged(const Tensor& user, std::int64_t rows = 1);

  // Starts one chunk's host operation on the chunk's pinned views (undefined for an absent side;
  // the same view twice for a side that is both) with `peer`.
  using Start = std::function<WorkPtr(const Tensor& in, const Tensor& out, int peer)>;

  // How a message ends. Point to point, its last chunk is always shorter than a chunk (empty when
  // the length is a multiple of it), so that a receiver expecting a different length gets a
  // chunk of the wrong length and fails instead of keeping a prefix. Collectives have equal
  // lengths on every rank (dist_ops checks them) and need no such end.
  enum class End : unsigned char { Short, Exact };

  // `in` and `out` hold one dtype and pieces of one length (at least one side is present). Chunks
  // hold chunk_bytes / itemsize whole elements (at least one).
  ChunkedWork(std::optional<Side> in, std::optional<Side> out, std::size_t chunk_bytes, End end,
              std::shared_ptr<const StagedBackend::DeviceStreams> streams, Start start, int peer);
  ChunkedWork(const ChunkedWork&) = delete;
  ChunkedWork& operator=(const ChunkedWork&) = delete;
  // Copies still queued read or write the pinned buffers and the caller's tensors: they finish
  // before any is released. The chunks' host Works then end as the host backend ends them.
  ~ChunkedWork() override;

  std::int64_t count() const { return count_; }

  // Posts chunks [begin, end) in order, each after its input side (if any) reached pinned memory.
  void post(std::int64_t begin, std::int64_t end);

  // A receive from kAnySource: once its first chunk has arrived (waiting for it within the host
  // backend's timeout), the rest are posted from that chunk's sender.
  void learn_source();

  int source_rank() const override;

  // A receive from kAnySource (`peer` is then ignored): post() only its first chunk.
  void receive_from_any_source() {
    from_any_source_ = true;
    source_known_ = false;
  }

 protected:
  bool test() override;
  void block() override;

 private:
  // Chunk `index`'s elements within one piece: [start, start + length).
  std::int64_t chunk_start(std::int64_t index) const { return index * chunk_elements_; }
  std::int64_t chunk_length(std::int64_t index) const;
  // Chunk `index`'s rows in `side`'s pinned buffer, next to each other.
  Tensor pinned_chunk(const Side& side, std::int64_t index) const;
  std::size_t slot(std::int64_t index, std::int64_t begin) const;
  // Copies chunk `index` of `side` between the caller's tensor and pinned memory: on the to-host
  // stream (to_pinned) or the to-device stream, or at once for host tensors.
  void copy_chunk(const Side& side, std::int64_t index, bool to_pinned) const;
  void queue_in(std::int64_t index, std::int64_t begin);
  void queue_back(std::int64_t index);
  // Copies back every chunk that has arrived, in order, without blocking; true once all have.
  // `quiet`: stops at a failed chunk instead of raising its error (the Work raises it later).
  bool advance(bool quiet);

  const std::optional<Side> in_;
  const std::optional<Side> out_;
  const std::int64_t piece_;           // elements in one piece
  const std::int64_t chunk_elements_;  // elements of one piece in one chunk (the last may hold fewer)
  const std::int64_t count_;
  const std::shared_ptr<const StagedBackend::DeviceStreams> streams_;  // null for host tensors
  const Start start_;
  int peer_;
  bool from_any_source_ = false;
  bool source_known_ = true;
  std::vector<WorkPtr> chunks_;             // the host operations posted, in chunk order
  std::int64_t settled_ = 0;                // chunks [0, settled_) completed (and copied back)
  std::vector<cuda::CopyEvent> ahead_;      // one per chunk copied ahead, reused in turn
  cuda::CopyEvent back_event_;              // after the last copy back queued
  bool back_event_queued_ = false;
};

}  // namespace tensortree::detail

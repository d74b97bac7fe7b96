// StagedBackend: a decorator that lets a host-memory backend (MPI without CUDA awareness) move
// CUDA tensors. Each operation copies its inputs into pinned host buffers (leased from the
// process's PinnedPool, so steady traffic allocates none), runs on the host backend, and copies
// the results back to the device when the Work finishes (on the waiting thread, in Work::wait or
// is_completed). Only the buffers an operation reads are copied in and only those it writes are
// copied out. Host tensors are staged the same way, so the decorator behaves alike on any device.
//
// Chunks: send, recv, broadcast, all_reduce and reduce (and the sends and receives of batch_p2p)
// of more than StagedBackendOptions::chunk_bytes travel as several host messages of that size, on
// the same tag; so do all_gather, gather, scatter and reduce_scatter whose every rank's piece is
// longer than a chunk, each chunk one host collective over the same part of every rank's piece
// (chunked_work.hpp), so that copying one chunk between device and pinned memory overlaps the host
// transfer of another. all_to_all stays whole: its blocks differ in length from rank to rank.
// Every chunk's host operation is posted before the call returns, in chunk order: the host
// backend's own ordering (MPI's per source, tag and communicator, and the order of collectives)
// then matches chunks exactly as it would have matched the whole messages, even when several
// operations with one tag are in flight. The caller's call therefore returns once
// the last chunk has been copied to pinned memory (local device work, never a wait on a peer);
// copies back to the device run as the chunks arrive, driven by the Work. A point-to-point
// message's last chunk is always shorter than a chunk (empty when its length is a multiple of
// one): a receiver expecting another length then fails on a chunk of the wrong length instead of
// keeping a prefix.
//
// A chunked receive from kAnySource learns its sender from its first chunk and only then posts
// the rest; until then a later receive on the same tag in this backend first waits (within the
// host backend's timeout) for that first chunk, so that it cannot take the sender's other chunks.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/cuda_api.hpp"
#include "comm/engine.hpp"

namespace tensortree::detail {

struct StagedBackendOptions {
  // Messages longer than this go in chunks of this many bytes (the last one shorter; reductions
  // round it down to whole elements). Both ends of a transfer must use the same value: each cuts
  // a message from its byte count alone.
  std::size_t chunk_bytes = std::size_t{1} << 20;
};

class ChunkedWork;

class StagedBackend final : public Engine {
 public:
  // `host` is borrowed and must outlive this backend.
  explicit StagedBackend(Engine& host, StagedBackendOptions options = {});

  std::string_view name() const override { return name_; }
  // The host backend's, for host and CUDA memory alike.
  TransportCapabilities capabilities() const override {
    TransportCapabilities host = host_.capabilities();
    host.cuda_memory = host.host_memory = true;
    return host;
  }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  void abort(const std::string& reason) override { host_.abort(reason); }

  WorkPtr broadcast(const Tensor& tensor, int root) override;
  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op) override;
  WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op) override;
  WorkPtr all_gather(const Tensor& output, const Tensor& input) override;
  WorkPtr gather(const Tensor& output, const Tensor& input, int root) override;
  WorkPtr scatter(const Tensor& output, const Tensor& input, int root) override;
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr all_to_all(const Tensor& output, const Tensor& input, std::span<const std::int64_t> output_counts,
                     std::span<const std::int64_t> input_counts) override;
  WorkPtr send(const Tensor& tensor, int dst, int tag) override;
  WorkPtr recv(const Tensor& tensor, int src, int tag) override;
  // The message lands in host memory either way: the host backend's own.
  ReceivedMessage recv_message(int src, int tag) override {
    settle_any_source_receive(tag);
    return host_.recv_message(src, tag);
  }
  WorkPtr batch_p2p(std::span<const P2POp> ops) override;
  WorkPtr barrier() override;

  // The copy streams of one device, made on first use: one per direction, so that copies to the
  // host overlap copies back to the device.
  struct DeviceStreams {
    cuda::CopyStream to_host;
    cuda::CopyStream to_device;
  };

 private:
  // Whether `tensor` goes in chunks.
  bool chunked(const Tensor& tensor) const;
  // Whether a collective whose every rank holds a piece like `piece` goes in chunks: by its length
  // alone, which every rank knows alike.
  bool chunked_pieces(const Tensor& piece) const;
  // all_gather and gather's root, chunked: `host_call` is the host collective on one chunk's views.
  WorkPtr gather_in_chunks(std::string_view op, const Tensor& output, const Tensor& input,
                           std::function<WorkPtr(const Tensor& in, const Tensor& out)> host_call);
  // The copy streams for `tensor`'s device; null for a host tensor.
  std::shared_ptr<const DeviceStreams> streams_for(const Tensor& tensor);
  WorkPtr chunked_recv(const Tensor& tensor, int src, int tag);
  // Before a receive on `tag`: a chunked receive from kAnySource on it that has not learned its
  // sender waits for its first chunk and posts the rest (see the header comment).
  void settle_any_source_receive(int tag);

  Engine& host_;
  StagedBackendOptions options_;
  std::string name_;
  std::mutex mutex_;
  std::map<int, std::shared_ptr<const DeviceStreams>> streams_;   // by device index
  std::map<int, std::weak_ptr<ChunkedWork>> unsettled_any_source_;  // by tag
};

}  // namespace tensortree::detail

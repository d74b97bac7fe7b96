// StagedBackend: a decorator that lets a host-memory backend (MPI without CUDA awareness) move
// CUDA tensors. Each operation copies its inputs into pinned host buffers (leased from the
// process's PinnedPool, so steady traffic allocates none), runs on the host backend, and copies
// the results back to the device when the Work finishes (on the waiting thread, in Work::wait or
// is_completed). Only the buffers an operation reads are copied in and
// only those it writes are copied out.
#pragma once

#include <string>

#include "tensortree/backend.hpp"

namespace tensortree::detail {

class StagedBackend final : public Backend {
 public:
  // `host` is borrowed and must outlive this backend.
  explicit StagedBackend(Backend& host);

  std::string_view name() const override { return name_; }
  // The host backend's, for host and CUDA memory alike.
  BackendCapabilities capabilities() const override {
    BackendCapabilities host = host_.capabilities();
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
  ReceivedMessage recv_message(int src, int tag) override { return host_.recv_message(src, tag); }
  WorkPtr batch_p2p(std::span<const P2POp> ops) override;
  WorkPtr barrier() override;

 private:
  Backend& host_;
  std::string name_;
};

}  // namespace tensortree::detail

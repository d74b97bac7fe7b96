// MpiBackend: every Collectives and PeerTransport operation as a nonblocking MPI call on one
// communicator, for tensors in host memory. The returned Work holds the requests and everything the transfer reads or writes.
#pragma once

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/abort_signal.hpp"
#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "transport/mpi/mpi_reductions.hpp"
#include "transport/mpi/mpi_work.hpp"
#include "comm/engine.hpp"

namespace tensortree::detail {

struct MpiBackendOptions {
  // The most elements one MPI count describes (MPI counts are int). Larger tensors are split into
  // several calls (reductions) or described by one derived datatype (everything else, so that a
  // message stays one message). Tests lower it to reach those paths with small tensors.
  std::int64_t max_count = INT_MAX;
  // The longest a blocking wait on one operation may last (the group's GroupOptions::timeout);
  // past it the wait throws Timeout.
  std::chrono::milliseconds timeout = kUnbounded;
  // The longest message recv_message allocates for (the group's GroupOptions::max_message_bytes):
  // a longer one is received into nothing (so that the sender is not left waiting) and refused
  // as CorruptData naming the sender, its length and this limit.
  std::uint64_t max_message_bytes = std::uint64_t{1} << 30;
};

class MpiBackend final : public Engine {
 public:
  // `comm` is borrowed: its owner (the group) outlives the backend.
  explicit MpiBackend(MPI_Comm comm, MpiBackendOptions options = {});

  std::string_view name() const override { return "mpi"; }
  TransportCapabilities capabilities() const override {
    return {.any_source = true, .unknown_length_messages = true, .bitwise_reductions = true,
            .host_memory = true, .cuda_memory = false, .ordered_by_posting = false};
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

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
  ReceivedMessage recv_message(int src, int tag) override;
  WorkPtr recv_matched(int src, int tag, ChooseDestination choose) override;
  WorkPtr batch_p2p(std::span<const P2POp> ops) override;
  WorkPtr barrier() override;
  // Later operations, and waits on those in flight, end with BackendError; a Work dropped
  // afterwards abandons its transfer instead of waiting for it.
  void abort(const std::string& reason) override { aborted_->raise(reason); }

 private:
  WorkPtr point_to_point(std::span<const P2POp> ops, const char* operation);
  // The wait limit of a new operation; BackendError once the backend was aborted.
  WaitLimit limit(const char* operation, int peer = -1) const {
    aborted_->throw_if_raised([&] { return fmt::format("the MPI transport of rank {}", rank_); });
    return {operation, peer, options_.timeout, aborted_};
  }
  // The byte length of the probed or matched message `status` describes; CorruptData, before
  // anything is allocated, when it is over options_.max_message_bytes.
  MPI_Count checked_message_length(const MPI_Status& status) const;

  MPI_Comm comm_;
  MpiBackendOptions options_;
  int rank_ = -1;
  int size_ = 0;
  int tag_upper_bound_ = 32767;  // the least MPI guarantees; the constructor asks for the real one
  MpiReductions reductions_;
  std::shared_ptr<AbortSignal> aborted_ = std::make_shared<AbortSignal>();
};

}  // namespace tensortree::detail

// InProcessBackend: the Collectives and PeerTransport between the threads of one in-process group
// (InProcessBootstrap).
// Point to point goes through the receivers' mailboxes (transport/in_process/mailbox.hpp: MPI's
// matching, eager sends); every collective is PairCollectives over the same mailboxes, on a
// channel of their own. Host memory only. Several backends of one group (the host one, the one a
// CUDA staging decorator borrows) share the mailboxes and the collectives' numbering, as MPI
// backends share their communicator.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/bootstrap.hpp"
#include "comm/abort_signal.hpp"
#include "transport/in_process/in_process_store.hpp"
#include "transport/in_process/in_process_work.hpp"
#include "transport/in_process/pair_collectives.hpp"
#include "comm/engine.hpp"

namespace tensortree::detail {

struct InProcessBackendOptions {
  std::chrono::milliseconds timeout = std::chrono::minutes(10);  // the group's: bounds every wait
  std::uint64_t max_message_bytes = std::uint64_t{1} << 30;      // the group's: bounds unknown-length receives
};

// One member's end of the group's mailboxes: what the backend and the Works of its collectives
// (which may outlive it) share.
struct InProcessEndpoint {
  std::shared_ptr<InProcessStore> store;
  int rank = -1;
  InProcessBackendOptions options;
  std::shared_ptr<AbortSignal> aborted = std::make_shared<AbortSignal>();

  InProcessWait wait_for(const char* operation, int peer) const;
  // Posts `ops` on `channel`, in order: sends delivered at once, receives posted. Checks peers,
  // tags and memory first, naming `operation`.
  WorkPtr post(std::span<const P2POp> ops, Channel channel, const char* operation) const;
};

class InProcessBackend final : public Engine {
 public:
  InProcessBackend(std::shared_ptr<InProcessStore> store, int rank, InProcessBackendOptions options);

  std::string_view name() const override { return "in-process"; }
  TransportCapabilities capabilities() const override {
    return {.any_source = true, .unknown_length_messages = true, .bitwise_reductions = true,
            .host_memory = true, .cuda_memory = false, .ordered_by_posting = false};
  }
  int rank() const override { return endpoint_.rank; }
  int size() const override { return endpoint_.store->size(); }

  WorkPtr broadcast(const Tensor& tensor, int root) override;
  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op) override;
  WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op) override;
  WorkPtr all_gather(const Tensor& output, const Tensor& input) override;
  WorkPtr gather(const Tensor& output, const Tensor& input, int root) override;
  WorkPtr scatter(const Tensor& output, const Tensor& input, int root) override;
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override;
  WorkPtr all_to_all(const Tensor& output, const Tensor& input, std::span<const std::int64_t> output_counts,
                     std::span<const std::int64_t> input_counts) override;
  WorkPtr barrier() override;

  WorkPtr send(const Tensor& tensor, int dst, int tag) override;
  WorkPtr recv(const Tensor& tensor, int src, int tag) override;
  ReceivedMessage recv_message(int src, int tag) override;
  WorkPtr recv_matched(int src, int tag, ChooseDestination choose) override;
  WorkPtr batch_p2p(std::span<const P2POp> ops) override;
  // Later operations, and waits on those in flight, end with BackendError.
  void abort(const std::string& reason) override;

 private:
  InProcessEndpoint endpoint_;
  PairCollectives collectives_;
};

// Whether `bootstrap` is an in-process one (its group's host backend is then InProcessBackend).
bool is_in_process(const Bootstrap& bootstrap);
// The in-process backend of the group `bootstrap` (an InProcessBootstrap: NotSupported otherwise)
// belongs to.
std::shared_ptr<Engine> make_in_process_backend(Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                                                 std::uint64_t max_message_bytes);

}  // namespace tensortree::detail

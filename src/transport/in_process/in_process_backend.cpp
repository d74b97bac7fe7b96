#include "transport/in_process/in_process_backend.hpp"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "transport/in_process/in_process_bootstrap.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// The collectives' channel of one endpoint.
class EndpointLink final : public PairLink {
 public:
  explicit EndpointLink(InProcessEndpoint endpoint) : endpoint_(std::move(endpoint)) {}
  int rank() const override { return endpoint_.rank; }
  int size() const override { return endpoint_.store->size(); }
  int next_collective() override { return endpoint_.store->mailbox(endpoint_.rank).next_collective(); }
  WorkPtr post(std::span<const P2POp> ops, const char* operation) override {
    return endpoint_.post(ops, Channel::Collectives, operation);
  }

 private:
  InProcessEndpoint endpoint_;
};

void check_op(const P2POp& op, int rank, int size, const char* operation) {
  const auto where = [&] { return fmt::format("in-process {} on rank {}", operation, rank); };
  const bool any_source = op.kind == P2POp::Kind::Recv && op.peer == kAnySource;
  if (!any_source && (op.peer < 0 || op.peer >= size)) {
    throw InvalidArgument(fmt::format("{}: peer {} is not a rank of a group of {}", where(), op.peer, size));
  }
  if (op.tag < 0) throw InvalidArgument(fmt::format("{}: tag {} is negative", where(), op.tag));
  if (!op.tensor.defined() || !op.tensor.device().is_cpu() || !op.tensor.is_contiguous()) {
    throw InvalidArgument(fmt::format("{} with rank {}: the in-process transport moves contiguous host tensors only",
                                      where(), op.peer));
  }
}

// A Timeout names the peer when the operation has one.
int common_peer(std::span<const P2POp> ops) {
  int peer = ops.empty() ? -1 : ops.front().peer;
  for (const P2POp& op : ops) peer = op.peer == peer ? peer : -1;
  return peer;
}

}  // namespace

InProcessWait InProcessEndpoint::wait_for(const char* operation, int peer) const {
  return {store, rank, operation, peer, options.timeout, aborted};
}

WorkPtr InProcessEndpoint::post(std::span<const P2POp> ops, Channel channel, const char* operation) const {
  aborted->throw_if_raised([&] { return fmt::format("the in-process transport of rank {}", rank); });
  for (const P2POp& op : ops) check_op(op, rank, store->size(), operation);
  std::vector<std::shared_ptr<PostedReceive>> receives;
  for (const P2POp& op : ops) {
    if (op.kind == P2POp::Kind::Send) {
      store->mailbox(op.peer).deliver(channel, rank, op.tag, op.tensor);
    } else {
      receives.push_back(store->mailbox(rank).post({channel, op.peer, op.tag}, op.tensor));
    }
  }
  return std::make_shared<PostedWork>(wait_for(operation, common_peer(ops)), std::move(receives));
}

InProcessBackend::InProcessBackend(std::shared_ptr<InProcessStore> store, int rank, InProcessBackendOptions options)
    : endpoint_{std::move(store), rank, options},
      collectives_(std::make_shared<EndpointLink>(endpoint_)) {}

WorkPtr InProcessBackend::broadcast(const Tensor& tensor, int root) { return collectives_.broadcast(tensor, root); }

WorkPtr InProcessBackend::all_reduce(const Tensor& tensor, ReduceOp op) { return collectives_.all_reduce(tensor, op); }

WorkPtr InProcessBackend::reduce(const Tensor& tensor, int root, ReduceOp op) {
  return collectives_.reduce(tensor, root, op);
}

WorkPtr InProcessBackend::all_gather(const Tensor& output, const Tensor& input) {
  return collectives_.all_gather(output, input);
}

WorkPtr InProcessBackend::gather(const Tensor& output, const Tensor& input, int root) {
  return collectives_.gather(output, input, root);
}

WorkPtr InProcessBackend::scatter(const Tensor& output, const Tensor& input, int root) {
  return collectives_.scatter(output, input, root);
}

WorkPtr InProcessBackend::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  return collectives_.reduce_scatter(output, input, op);
}

WorkPtr InProcessBackend::all_to_all(const Tensor& output, const Tensor& input,
                                     std::span<const std::int64_t> output_counts,
                                     std::span<const std::int64_t> input_counts) {
  return collectives_.all_to_all(output, input, output_counts, input_counts);
}

WorkPtr InProcessBackend::barrier() { return collectives_.barrier(); }

WorkPtr InProcessBackend::send(const Tensor& tensor, int dst, int tag) {
  const P2POp op{P2POp::Kind::Send, tensor, dst, tag};
  return endpoint_.post({&op, 1}, Channel::PointToPoint, "send");
}

WorkPtr InProcessBackend::recv(const Tensor& tensor, int src, int tag) {
  const P2POp op{P2POp::Kind::Recv, tensor, src, tag};
  return endpoint_.post({&op, 1}, Channel::PointToPoint, "recv");
}

WorkPtr InProcessBackend::batch_p2p(std::span<const P2POp> ops) {
  return endpoint_.post(ops, Channel::PointToPoint, "batch_p2p");
}

ReceivedMessage InProcessBackend::recv_message(int src, int tag) {
  const InProcessWait wait = endpoint_.wait_for("recv_message", src);
  wait.throw_if_aborted();
  const P2POp probe{P2POp::Kind::Recv, Tensor::empty({0}, {DType::UInt8}), src, tag};
  check_op(probe, rank(), size(), "recv_message");
  TakenMessage taken = take_bounded_waiting(wait, {Channel::PointToPoint, src, tag}, endpoint_.options.max_message_bytes);
  Tensor bytes = Tensor::empty({static_cast<std::int64_t>(taken.bytes->size())}, {DType::UInt8});
  if (!taken.bytes->empty()) std::memcpy(bytes.data_ptr(), taken.bytes->data(), taken.bytes->size());
  return {std::move(bytes), taken.source};
}

WorkPtr InProcessBackend::recv_matched(int src, int tag, ChooseDestination choose) {
  endpoint_.aborted->throw_if_raised([&] { return fmt::format("the in-process transport of rank {}", rank()); });
  const P2POp probe{P2POp::Kind::Recv, Tensor::empty({0}, {DType::UInt8}), src, tag};
  check_op(probe, rank(), size(), "recv_matched");
  return std::make_shared<MatchedWork>(endpoint_.wait_for("recv_matched", src), MessageKey{Channel::PointToPoint, src, tag},
                                       endpoint_.options.max_message_bytes, std::move(choose));
}

void InProcessBackend::abort(const std::string& reason) {
  endpoint_.aborted->raise(reason);
  endpoint_.store->mailbox(endpoint_.rank).wake();
}

bool is_in_process(const Bootstrap& bootstrap) { return dynamic_cast<const InProcessBootstrap*>(&bootstrap) != nullptr; }

std::shared_ptr<Engine> make_in_process_backend(Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                                                 std::uint64_t max_message_bytes) {
  auto* in_process = dynamic_cast<InProcessBootstrap*>(&bootstrap);
  if (!in_process) throw NotSupported("the in-process backend needs an in-process bootstrap");
  return std::make_shared<InProcessBackend>(in_process->store(), in_process->rank(),
                                            InProcessBackendOptions{timeout, max_message_bytes});
}

}  // namespace tensortree::detail

// MpiBackend's point-to-point operations: send, recv, batches of both, the matched receive of a
// message of unknown length, and the barrier.
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/text_format.hpp"
#include "transport/mpi/mpi_argument_check.hpp"
#include "transport/mpi/mpi_backend.hpp"
#include "transport/mpi/mpi_blocks.hpp"
#include "transport/mpi/mpi_check.hpp"
#include "transport/mpi/mpi_work.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// Posts one send or receive of a whole tensor into `work`.
void post_p2p(const P2POp& op, MPI_Comm comm, std::int64_t max_count, MpiWork& work) {
  work.keep(op.tensor);
  const Block block = block_of(op.tensor.numel(), op.tensor.dtype(), max_count, work);
  if (op.kind == P2POp::Kind::Send) {
    TT_MPI_CHECK(
        MPI_Isend(op.tensor.data_ptr(), block.count, block.datatype, op.peer, op.tag, comm, work.request_slot()));
    return;
  }
  const bool any_source = op.peer == kAnySource;
  TT_MPI_CHECK(MPI_Irecv(op.tensor.data_ptr(), block.count, block.datatype, any_source ? MPI_ANY_SOURCE : op.peer,
                         op.tag, comm, work.receive_slot(block.datatype, op.tensor.numel(), any_source)));
}

// recv_matched's Work: probes until a message matches, then receives it where `choose` says. The
// probe does not take the message: one over the limit is refused before anything is allocated.
class MatchedReceive final : public Work {
 public:
  MatchedReceive(int src, int tag, MPI_Comm comm, int rank, WaitLimit limit, std::int64_t max_count,
                 std::function<void(const MPI_Status&)> check_length, ChooseDestination choose)
      : src_(src), tag_(tag), comm_(comm), rank_(rank), limit_(std::move(limit)), max_count_(max_count),
        check_length_(std::move(check_length)), choose_(std::move(choose)) {}

  int source_rank() const override {
    if (source_ < 0) throw NotSupported("source_rank is known only once the message has been matched");
    return source_;
  }

 protected:
  bool test() override {
    if (!transfer_ && !match()) return false;
    if (!transfer_->is_completed()) return false;
    if (const std::exception_ptr error = transfer_->exception()) std::rethrow_exception(error);
    return true;
  }
  void block() override {
    wait_within(limit_, rank_, [this] { return test(); });
  }

 private:
  bool match() {
    int found = 0;
    MPI_Status status;
    TT_MPI_CHECK(MPI_Iprobe(src_ == kAnySource ? MPI_ANY_SOURCE : src_, tag_, comm_, &found, &status));
    if (found == 0) return false;
    check_length_(status);
    MPI_Message message = MPI_MESSAGE_NULL;
    int matched = 0;
    TT_MPI_CHECK(MPI_Improbe(status.MPI_SOURCE, tag_, comm_, &matched, &message, &status));
    if (matched == 0) return false;  // another thread took it: probe again
    check_length_(status);
    MPI_Count length = 0;
    TT_MPI_CHECK(MPI_Get_elements_x(&status, MPI_BYTE, &length));
    source_ = status.MPI_SOURCE;
    auto work = std::make_shared<MpiWork>(rank_, limit_);
    Tensor destination;
    std::exception_ptr refused;
    try {
      destination = choose_(source_, static_cast<std::uint64_t>(length));
      if (!destination.defined() || destination.nbytes() != static_cast<std::size_t>(length)) {
        throw InvalidArgument(fmt::format("recv_matched: the chosen destination does not hold the {} bytes rank {} "
                                          "sent", length, source_));
      }
    } catch (...) {
      // A matched message must still be received; it lands in a scratch buffer (already bounded).
      refused = std::current_exception();
      destination = Tensor::empty({static_cast<std::int64_t>(length)}, {DType::UInt8});
    }
    work->keep(destination);
    const Block block = block_of(length, DType::UInt8, max_count_, *work);
    TT_MPI_CHECK(MPI_Imrecv(destination.data_ptr(), block.count, block.datatype, &message, work->request_slot()));
    transfer_ = std::move(work);
    if (refused) {
      transfer_->wait();
      std::rethrow_exception(refused);
    }
    return true;
  }

  int src_;
  int tag_;
  MPI_Comm comm_;
  int rank_;
  WaitLimit limit_;
  std::int64_t max_count_;
  std::function<void(const MPI_Status&)> check_length_;
  ChooseDestination choose_;
  WorkPtr transfer_;
  int source_ = -1;
};

}  // namespace

WorkPtr MpiBackend::send(const Tensor& tensor, int dst, int tag) {
  const P2POp op{P2POp::Kind::Send, tensor, dst, tag};
  return point_to_point({&op, 1}, "send");
}

WorkPtr MpiBackend::recv(const Tensor& tensor, int src, int tag) {
  const P2POp op{P2POp::Kind::Recv, tensor, src, tag};
  return point_to_point({&op, 1}, "recv");
}

// Matched probe and receive: no other thread's receive can take the probed message in between.
MPI_Count MpiBackend::checked_message_length(const MPI_Status& status) const {
  MPI_Count length = 0;
  TT_MPI_CHECK(MPI_Get_elements_x(&status, MPI_BYTE, &length));
  if (length < 0 || static_cast<std::uint64_t>(length) > options_.max_message_bytes) {
    throw CorruptData(fmt::format("recv_message: rank {} sent a message of {} bytes, more than this rank's limit of "
                                  "{} bytes (GroupOptions::max_message_bytes); nothing was allocated and the message "
                                  "was left unreceived", status.MPI_SOURCE, static_cast<long long>(length),
                                  options_.max_message_bytes));
  }
  return length;
}

ReceivedMessage MpiBackend::recv_message(int src, int tag) {
  const Check check(rank_, size_, "recv_message");
  if (src != kAnySource) check.group_rank(src, "peer");
  check.tag(tag, tag_upper_bound_);
  MPI_Status status;
  // Probed by polling, so that the group's timeout bounds the wait for a message nobody sends. The
  // probe does not match the message: one over the limit is refused without receiving it (Open MPI
  // crashes on a truncated MPI_Mrecv, so a matched message could not be drained without its bytes).
  const WaitLimit bound = limit("recv_message", src);
  const auto arrived = [&] {
    int found = 0;
    TT_MPI_CHECK(MPI_Iprobe(src == kAnySource ? MPI_ANY_SOURCE : src, tag, comm_, &found, &status));
    return found != 0;
  };
  wait_within(bound, rank_, arrived);
  checked_message_length(status);
  // Messages from one sender on one tag do not overtake each other: matching on the probed sender
  // takes the message just checked, or, if another thread received that one meanwhile, that
  // sender's next one, checked again before anything is allocated for it.
  MPI_Message message = MPI_MESSAGE_NULL;
  int matched = 0;
  TT_MPI_CHECK(MPI_Improbe(status.MPI_SOURCE, tag, comm_, &matched, &message, &status));
  if (matched == 0) throw BackendError("recv_message: the probed message was received by another thread");
  const MPI_Count length = checked_message_length(status);
  ReceivedMessage received{Tensor::empty({static_cast<std::int64_t>(length)}, {DType::UInt8}), status.MPI_SOURCE};
  // Received like any other transfer, so that a sender that dies mid-message costs a Timeout.
  MpiWork work(rank_, bound);
  work.keep(received.bytes);
  const Block block = block_of(length, DType::UInt8, options_.max_count, work);
  TT_MPI_CHECK(MPI_Imrecv(received.bytes.data_ptr(), block.count, block.datatype, &message, work.request_slot()));
  work.wait();
  return received;
}

WorkPtr MpiBackend::recv_matched(int src, int tag, ChooseDestination choose) {
  const Check check(rank_, size_, "recv_matched");
  if (src != kAnySource) check.group_rank(src, "peer");
  check.tag(tag, tag_upper_bound_);
  auto check_length = [this](const MPI_Status& status) { checked_message_length(status); };
  return std::make_shared<MatchedReceive>(src, tag, comm_, rank_, limit("recv_matched", src), options_.max_count,
                                          std::move(check_length), std::move(choose));
}

WorkPtr MpiBackend::batch_p2p(std::span<const P2POp> ops) { return point_to_point(ops, "batch_p2p"); }

WorkPtr MpiBackend::point_to_point(std::span<const P2POp> ops, const char* operation) {
  const Check check(rank_, size_, operation);
  for (const P2POp& op : ops) {
    check.host(op.tensor, op.kind == P2POp::Kind::Send ? "sent tensor" : "received tensor");
    if (op.kind == P2POp::Kind::Send || op.peer != kAnySource) check.group_rank(op.peer, "peer");
    check.tag(op.tag, tag_upper_bound_);
  }
  // A Timeout names the peer when the operation has one.
  int peer = ops.empty() ? -1 : ops.front().peer;
  for (const P2POp& op : ops) peer = op.peer == peer ? peer : -1;
  auto work = std::make_shared<MpiWork>(rank_, limit(operation, peer));
  for (const P2POp& op : ops) post_p2p(op, comm_, options_.max_count, *work);
  return work;
}

WorkPtr MpiBackend::barrier() {
  auto work = std::make_shared<MpiWork>(rank_, limit("barrier"));
  TT_MPI_CHECK(MPI_Ibarrier(comm_, work->request_slot()));
  return work;
}

}  // namespace tensortree::detail

// Backend: one communicator's operations for one kind of memory (c10d's Backend). MpiBackend and
// NcclBackend implement it; they are the only code that calls MPI or NCCL. Everything above
// (dist_ops, the tree methods) is written once, over this interface.
//
// Contract for every operation:
// - ranks are group ranks; tensors are contiguous and on the backend's kind of device (dist_ops
//   makes copies where a caller's are not);
// - the caller allocates outputs; the Work keeps every tensor it was given alive until it completes;
// - arguments are already validated by dist_ops (roots in range, sizes consistent), so a backend
//   checks only what it alone knows (dtypes it cannot reduce, messages too large for it);
// - an operation this backend lacks throws NotSupported("<backend> does not support <op>").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "tensortree/export.hpp"
#include "tensortree/reduce_op.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/work.hpp"

namespace tensortree {

// Receive from whichever rank sends first; Work::source_rank() then says who it was.
inline constexpr int kAnySource = -1;

// One send or receive of a batch posted together (batch_p2p).
struct P2POp {
  enum class Kind : unsigned char { Send, Recv };
  Kind kind;
  Tensor tensor;
  int peer;
  int tag = 0;
};

// A message whose length the receiver did not know: its bytes (a 1-D uint8 CPU tensor) and sender.
struct ReceivedMessage {
  Tensor bytes;
  int source = -1;
};

// Where a matched message goes (Backend::recv_matched): given its sender (a group rank) and length,
// a 1-D uint8 host tensor of exactly `bytes` to receive it into. Throws to refuse the message.
using ChooseDestination = std::function<Tensor(int source, std::uint64_t bytes)>;

// What a backend can do, for code that must choose (never compare backend names).
struct BackendCapabilities {
  bool any_source = false;              // recv and irecv accept kAnySource
  bool unknown_length_messages = false;  // recv_message; a receive longer than the message is an error
  bool bitwise_reductions = false;       // ReduceOp::BitwiseAnd/Or/Xor
  bool host_memory = false;              // moves tensors in host memory
  bool cuda_memory = false;              // moves tensors in CUDA device memory
  bool ordered_by_posting = false;       // matches messages in posting order and ignores tags
};

class TT_API Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  virtual BackendCapabilities capabilities() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual WorkPtr broadcast(const Tensor& tensor, int root);
  virtual WorkPtr all_reduce(const Tensor& tensor, ReduceOp op);
  virtual WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op);
  // `output` holds size() blocks of input.numel() elements; rank r's input lands in block r.
  virtual WorkPtr all_gather(const Tensor& output, const Tensor& input);
  // As all_gather, into the root's `output` only (other ranks pass an undefined tensor).
  virtual WorkPtr gather(const Tensor& output, const Tensor& input, int root);
  // The root's `input` holds size() blocks of output.numel() elements; block r goes to rank r.
  virtual WorkPtr scatter(const Tensor& output, const Tensor& input, int root);
  // `input` holds size() blocks of output.numel() elements; block r of every rank is reduced into
  // rank r's output.
  virtual WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op);
  // Block r of `input` (input_counts[r] elements) goes to rank r; block r of `output`
  // (output_counts[r] elements) comes from rank r. Blocks are consecutive.
  virtual WorkPtr all_to_all(const Tensor& output, const Tensor& input, std::span<const std::int64_t> output_counts,
                             std::span<const std::int64_t> input_counts);
  virtual WorkPtr send(const Tensor& tensor, int dst, int tag);
  // `src` may be kAnySource.
  virtual WorkPtr recv(const Tensor& tensor, int src, int tag);
  // Blocks until a message from `src` (may be kAnySource) has arrived, then receives it whole into
  // a host buffer of its length (MPI probes it first). For messages that announce what follows.
  virtual ReceivedMessage recv_message(int src, int tag);
  // The nonblocking recv_message: matches the next message from `src` (may be kAnySource), bounds
  // its length by the group's max_message_bytes, asks `choose` where it goes, and receives it
  // there. Work::source_rank() says who sent. For receives whose sender decides the form of the
  // message (the node-local transport's frames next to plain messages from other nodes).
  virtual WorkPtr recv_matched(int src, int tag, ChooseDestination choose);
  // Memory on `device` for a buffer this backend will send from, in the form it moves fastest (a
  // node-local transport sends from its shared memory without copying it). The default allocates
  // ordinary memory.
  virtual std::shared_ptr<Storage> allocate_message_buffer(std::size_t nbytes, Device device);
  // Every operation posted at once; completes when all have.
  virtual WorkPtr batch_p2p(std::span<const P2POp> ops);
  virtual WorkPtr barrier();

  // Ends this rank's use of the backend (Group::abort): every later operation, and every wait on
  // one in flight, ends with BackendError naming `reason`; a transport that can stop its transfers
  // does (NCCL aborts its communicator). Cannot fail; the default does nothing.
  virtual void abort(const std::string& reason);

 protected:
  [[noreturn]] void unsupported(std::string_view operation) const;
};

}  // namespace tensortree

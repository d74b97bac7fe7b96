// Collectives: one communicator's collective operations over a group, for one kind of memory
// (c10d's Backend, less its point-to-point half, which is PeerTransport's). MPI, NCCL, the staging
// decorator and the collectives built over pairs implement it; they are the only code that calls
// MPI or NCCL. dist_ops and the tree methods are written once, over this interface.
//
// Contract for every operation:
// - ranks are group ranks; tensors are contiguous and on the engine's kind of device (dist_ops
//   makes copies where a caller's are not);
// - the caller allocates outputs; the Work keeps every tensor it was given alive until it completes;
// - arguments are already validated by dist_ops (roots in range, sizes consistent), so an engine
//   checks only what it alone knows (dtypes it cannot reduce, messages too large for it);
// - an operation this engine lacks throws NotSupported("<name> does not support <op>").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tensortree/export.hpp"
#include "tensortree/reduce_op.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/transport_capabilities.hpp"
#include "tensortree/work.hpp"

namespace tensortree {

class TT_API Collectives {
 public:
  virtual ~Collectives() = default;

  virtual std::string_view name() const = 0;
  virtual TransportCapabilities capabilities() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  [[nodiscard]] virtual WorkPtr broadcast(const Tensor& tensor, int root);
  [[nodiscard]] virtual WorkPtr all_reduce(const Tensor& tensor, ReduceOp op);
  [[nodiscard]] virtual WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op);
  // `output` holds size() blocks of input.numel() elements; rank r's input lands in block r.
  [[nodiscard]] virtual WorkPtr all_gather(const Tensor& output, const Tensor& input);
  // As all_gather, into the root's `output` only (other ranks pass an undefined tensor).
  [[nodiscard]] virtual WorkPtr gather(const Tensor& output, const Tensor& input, int root);
  // The root's `input` holds size() blocks of output.numel() elements; block r goes to rank r.
  [[nodiscard]] virtual WorkPtr scatter(const Tensor& output, const Tensor& input, int root);
  // `input` holds size() blocks of output.numel() elements; block r of every rank is reduced into
  // rank r's output.
  [[nodiscard]] virtual WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op);
  // Block r of `input` (input_counts[r] elements) goes to rank r; block r of `output`
  // (output_counts[r] elements) comes from rank r. Blocks are consecutive.
  [[nodiscard]] virtual WorkPtr all_to_all(const Tensor& output, const Tensor& input, std::span<const std::int64_t> output_counts,
                             std::span<const std::int64_t> input_counts);
  [[nodiscard]] virtual WorkPtr barrier();

  // Ends this rank's use of the engine (Group::abort): every later operation, and every wait on
  // one in flight, ends with BackendError naming `reason`; an engine that can stop its transfers
  // does (NCCL aborts its communicator). Cannot fail; the default does nothing.
  virtual void abort(const std::string& reason);
};

}  // namespace tensortree

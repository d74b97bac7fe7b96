// dist_ops: every collective and point-to-point operation for plain tensors, over a Group.
//
// The conveniences over torch.distributed (d9d's dist_ops): outputs are allocated for you; the
// *_variadic_shape forms let each rank contribute a tensor of its own shape and dtype that the
// receivers do not know in advance (one small round for shape and dtype, one for data); every
// operation also has an asynchronous form returning a Work. Arguments are checked before anything
// is sent: a src or dst outside the group, a list whose length is not the group size, or a wrong dtype or
// shape for an in-place operation is InvalidArgument naming the argument. A rank that is not a
// member of the group gets InvalidArgument too.
//
// Tensors may be non-contiguous (they are packed first and results copied back) and on the CPU
// (MPI) or a CUDA device (NCCL, or MPI through pinned memory). CUDA work completes in stream order:
// after wait() returns, the results are ready on the host's view of the device (the backend has
// synchronised its stream).
//
// Asynchronous forms whose outputs depend on what the peers hold (scatter's receivers,
// all_to_all_single without output splits, the variadic forms) finish their small round before
// they return, and only the data round is left in flight. That keeps the order in which ranks post
// collectives the order of the calls, whatever order the Works are later waited in.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensortree/comm_options.hpp"
#include "tensortree/export.hpp"
#include "tensortree/group.hpp"
#include "tensortree/peer_transport.hpp"
#include "tensortree/reduce_op.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/work.hpp"

namespace tensortree::dist {

// Point-to-point tags are 0..kMaxUserTag; the tags above are kept for dist_ops' own rounds.
inline constexpr int kMaxUserTag = 32000;

// ---- collectives: every member of the group calls them ----------------------------------------
TT_API void broadcast(const Tensor& tensor, int src, const Group& group);
[[nodiscard]] TT_API WorkPtr broadcast_async(const Tensor& tensor, int src, const Group& group);

// Bitwise ops need an integer or bool tensor (InvalidArgument otherwise), Min and Max a real one.
TT_API void all_reduce(const Tensor& tensor, const Group& group, ReduceOp op = ReduceOp::Sum);
[[nodiscard]] TT_API WorkPtr all_reduce_async(const Tensor& tensor, const Group& group, ReduceOp op = ReduceOp::Sum);

// The result lands in rank dst's `tensor`; other ranks' tensors are left as they were.
TT_API void reduce(const Tensor& tensor, int dst, const Group& group, ReduceOp op = ReduceOp::Sum);
[[nodiscard]] TT_API WorkPtr reduce_async(const Tensor& tensor, int dst, const Group& group, ReduceOp op = ReduceOp::Sum);

// One tensor per rank, in rank order; every rank's tensor has this rank's shape and dtype. The
// results are views of one allocation.
TT_API std::vector<Tensor> all_gather(const Tensor& tensor, const Group& group);
[[nodiscard]] TT_API Pending<std::vector<Tensor>> all_gather_async(const Tensor& tensor, const Group& group);
// The ranks' tensors concatenated along dimension 0 (a tensor of at least one dimension).
TT_API Tensor all_gather_into_tensor(const Tensor& tensor, const Group& group);
[[nodiscard]] TT_API Pending<Tensor> all_gather_into_tensor_async(const Tensor& tensor, const Group& group);

// On rank dst, one tensor per rank (views of one allocation); elsewhere an empty vector.
TT_API std::vector<Tensor> gather(const Tensor& tensor, int dst, const Group& group);
[[nodiscard]] TT_API Pending<std::vector<Tensor>> gather_async(const Tensor& tensor, int dst, const Group& group);

// Rank src passes one tensor per rank (one shape and dtype); every rank receives its own. Other
// ranks pass an empty span (anything else is ignored) and learn the shape and dtype in a small
// first round, which also carries src's verdict on its inputs: when they are invalid, every
// rank throws InvalidArgument and nothing else is sent.
TT_API Tensor scatter(std::span<const Tensor> inputs, int src, const Group& group);
[[nodiscard]] TT_API Pending<Tensor> scatter_async(std::span<const Tensor> inputs, int src, const Group& group);

// inputs[r] of every rank is reduced into rank r's result (list form: one tensor per rank, one shape).
TT_API Tensor reduce_scatter(std::span<const Tensor> inputs, const Group& group, ReduceOp op = ReduceOp::Sum);
[[nodiscard]] TT_API Pending<Tensor> reduce_scatter_async(std::span<const Tensor> inputs, const Group& group, ReduceOp op = ReduceOp::Sum);
// Tensor form: `input`'s dimension 0 is split into group.size() equal blocks.
TT_API Tensor reduce_scatter_tensor(const Tensor& input, const Group& group, ReduceOp op = ReduceOp::Sum);
[[nodiscard]] TT_API Pending<Tensor> reduce_scatter_tensor_async(const Tensor& input, const Group& group, ReduceOp op = ReduceOp::Sum);

// inputs[r] goes to rank r; result[r] came from rank r. Every input on every rank has one shape
// and dtype (all_to_all_variadic_shape lifts that).
TT_API std::vector<Tensor> all_to_all(std::span<const Tensor> inputs, const Group& group);
[[nodiscard]] TT_API Pending<std::vector<Tensor>> all_to_all_async(std::span<const Tensor> inputs, const Group& group);

// Rows of dimension 0: input_splits[r] rows go to rank r (equal blocks when empty), and
// output_splits[r] rows come from rank r (learned from the peers in a small round when empty; that
// round also rejects peers whose dtype or row shape differ from this rank's).
struct AllToAllSplits {
  std::vector<std::int64_t> input_splits;
  std::vector<std::int64_t> output_splits;
};
TT_API Tensor all_to_all_single(const Tensor& input, const Group& group, const AllToAllSplits& splits = {});
[[nodiscard]] TT_API Pending<Tensor> all_to_all_single_async(const Tensor& input, const Group& group, const AllToAllSplits& splits = {});

TT_API void barrier(const Group& group);
[[nodiscard]] TT_API WorkPtr barrier_async(const Group& group);

// ---- variadic shapes: each rank's tensor may differ in ndim, shape and dtype ------------------
// Tensors of up to 16 dimensions, on the same kind of device on every rank. Results are views of
// one allocation, each starting on a 64-byte boundary.
TT_API std::vector<Tensor> all_gather_variadic_shape(const Tensor& tensor, const Group& group);
[[nodiscard]] TT_API Pending<std::vector<Tensor>> all_gather_variadic_shape_async(const Tensor& tensor, const Group& group);
// On rank dst, one tensor per rank; elsewhere an empty vector.
TT_API std::vector<Tensor> gather_variadic_shape(const Tensor& tensor, int dst, const Group& group);
[[nodiscard]] TT_API Pending<std::vector<Tensor>> gather_variadic_shape_async(const Tensor& tensor, int dst, const Group& group);
// inputs[r] (any shape and dtype) goes to rank r; result[r] came from rank r.
TT_API std::vector<Tensor> all_to_all_variadic_shape(std::span<const Tensor> inputs, const Group& group);
[[nodiscard]] TT_API Pending<std::vector<Tensor>> all_to_all_variadic_shape_async(std::span<const Tensor> inputs, const Group& group);

// ---- point to point ------------------------------------------------------------------------------
// Options as TensorTree's (comm_options.hpp): tags are 0..kMaxUserTag; mode and threads concern trees.
TT_API void send(const Tensor& tensor, int dst, const Group& group, const CommOptions& options = {});
[[nodiscard]] TT_API WorkPtr isend(const Tensor& tensor, int dst, const Group& group, const CommOptions& options = {});
// Into `tensor` (its shape and dtype must match what is sent).
TT_API void recv(const Tensor& tensor, int src, const Group& group, const CommOptions& options = {});
// `src` may be kAnySource: the Work's source_rank() then names the sender.
[[nodiscard]] TT_API WorkPtr irecv(const Tensor& tensor, int src, const Group& group, const CommOptions& options = {});
// From whichever rank sends first; returns that rank.
TT_API int recv_any(const Tensor& tensor, const Group& group, const CommOptions& options = {});
// Every send and receive posted at once (torch's batch_isend_irecv): one Work for all of them.
// Every op's tensor is on one kind of device.
[[nodiscard]] TT_API WorkPtr batch_isend_irecv(std::span<const P2POp> ops, const Group& group);

}  // namespace tensortree::dist

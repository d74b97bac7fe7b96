#include "transport/staged/staged_backend.hpp"

#include <string>
#include <utility>
#include <vector>

#include "core/pinned_pool.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// The host copies of one operation's tensors, and the device tensors its results go back to.
// Host tensors are staged too, so the decorator behaves the same whatever the device.
class Staging {
 public:
  // A host buffer holding `tensor`'s values (undefined stays undefined).
  Tensor in(const Tensor& tensor) {
    if (!tensor.defined()) return tensor;
    Tensor host = host_buffer(tensor);
    host.copy_(tensor);
    return host;
  }

  // A host buffer whose values are copied into `tensor` when the operation has finished.
  Tensor out(const Tensor& tensor) {
    if (!tensor.defined()) return tensor;
    Tensor host = host_buffer(tensor);
    copy_back_.emplace_back(tensor, host);
    return host;
  }

  // Both: the operation reads and writes the buffer (in-place reductions).
  Tensor in_out(const Tensor& tensor) {
    Tensor host = in(tensor);
    if (tensor.defined()) copy_back_.emplace_back(tensor, host);
    return host;
  }

  WorkPtr after(WorkPtr host_work) {
    if (copy_back_.empty()) return host_work;
    return Work::then(std::move(host_work), [copies = std::move(copy_back_)] {
      for (const auto& [device, host] : copies) device.copy_(host);
    });
  }

 private:
  // From the process's pinned pool: staging allocates no page-locked memory once the pool holds
  // buffers of the sizes in use. The buffer returns to the pool when the last Work using it ends.
  static Tensor host_buffer(const Tensor& tensor) {
    return Tensor(PinnedPool::shared().storage(tensor.nbytes()), 0, tensor.dtype(), tensor.shape(), {});
  }

  std::vector<std::pair<Tensor, Tensor>> copy_back_;
};

}  // namespace

StagedBackend::StagedBackend(Backend& host)
    : host_(host), name_(std::string(host.name()) + " (staged through pinned host memory)") {}

WorkPtr StagedBackend::broadcast(const Tensor& tensor, int root) {
  Staging staging;
  const Tensor host = rank() == root ? staging.in(tensor) : staging.out(tensor);
  return staging.after(host_.broadcast(host, root));
}

WorkPtr StagedBackend::all_reduce(const Tensor& tensor, ReduceOp op) {
  Staging staging;
  const Tensor host = staging.in_out(tensor);
  return staging.after(host_.all_reduce(host, op));
}

WorkPtr StagedBackend::reduce(const Tensor& tensor, int root, ReduceOp op) {
  Staging staging;
  const Tensor host = rank() == root ? staging.in_out(tensor) : staging.in(tensor);
  return staging.after(host_.reduce(host, root, op));
}

WorkPtr StagedBackend::all_gather(const Tensor& output, const Tensor& input) {
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = staging.out(output);
  return staging.after(host_.all_gather(host_output, host_input));
}

WorkPtr StagedBackend::gather(const Tensor& output, const Tensor& input, int root) {
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = rank() == root ? staging.out(output) : Tensor();
  return staging.after(host_.gather(host_output, host_input, root));
}

WorkPtr StagedBackend::scatter(const Tensor& output, const Tensor& input, int root) {
  Staging staging;
  const Tensor host_input = rank() == root ? staging.in(input) : Tensor();
  const Tensor host_output = staging.out(output);
  return staging.after(host_.scatter(host_output, host_input, root));
}

WorkPtr StagedBackend::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = staging.out(output);
  return staging.after(host_.reduce_scatter(host_output, host_input, op));
}

WorkPtr StagedBackend::all_to_all(const Tensor& output, const Tensor& input,
                                  std::span<const std::int64_t> output_counts,
                                  std::span<const std::int64_t> input_counts) {
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = staging.out(output);
  return staging.after(host_.all_to_all(host_output, host_input, output_counts, input_counts));
}

WorkPtr StagedBackend::send(const Tensor& tensor, int dst, int tag) {
  Staging staging;
  return staging.after(host_.send(staging.in(tensor), dst, tag));
}

WorkPtr StagedBackend::recv(const Tensor& tensor, int src, int tag) {
  Staging staging;
  return staging.after(host_.recv(staging.out(tensor), src, tag));
}

WorkPtr StagedBackend::batch_p2p(std::span<const P2POp> ops) {
  Staging staging;
  std::vector<P2POp> host_ops(ops.begin(), ops.end());
  for (P2POp& op : host_ops) {
    op.tensor = op.kind == P2POp::Kind::Send ? staging.in(op.tensor) : staging.out(op.tensor);
  }
  return staging.after(host_.batch_p2p(host_ops));
}

WorkPtr StagedBackend::barrier() { return host_.barrier(); }

}  // namespace tensortree::detail

// NcclBackend: every Collectives and PeerTransport operation through one NCCL communicator, on
// the engine's own CUDA stream. See nccl_backend.hpp for the ordering and completion contract.
#include "transport/nccl/nccl_backend.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "cuda/cuda_device_guard.hpp"
#include "transport/nccl/nccl_check.hpp"
#include "transport/nccl/nccl_handles.hpp"
#include "transport/nccl/nccl_reductions.hpp"
#include "transport/nccl/nccl_state.hpp"
#include "transport/nccl/nccl_work.hpp"
#include "tensortree/device.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// Data movement hands NCCL bytes: it moves every dtype, and NCCL moves bytes for these anyway.
constexpr ncclDataType_t kBytes = ncclUint8;

std::byte* first_byte(const Tensor& tensor) { return static_cast<std::byte*>(tensor.data_ptr()); }

// One send or receive of `bytes` bytes, inside an open NCCL group or alone.
void post(P2POp::Kind kind, void* data, std::size_t bytes, int peer, ncclComm_t comm, cudaStream_t stream) {
  if (kind == P2POp::Kind::Send) {
    TT_NCCL_CHECK(ncclSend(data, bytes, kBytes, peer, comm, stream));
  } else {
    TT_NCCL_CHECK(ncclRecv(data, bytes, kBytes, peer, comm, stream));
  }
}

class NcclBackend final : public Engine {
 public:
  explicit NcclBackend(std::shared_ptr<NcclState> state)
      : state_(std::move(state)),
        barrier_token_(Tensor::zeros({1}, {DType::UInt8, Device::cuda(state_->device())})) {}

  std::string_view name() const override { return "nccl"; }
  TransportCapabilities capabilities() const override {
    return {.any_source = false, .unknown_length_messages = false, .bitwise_reductions = false,
            .host_memory = false, .cuda_memory = true, .ordered_by_posting = true};
  }
  int rank() const override { return state_->rank(); }
  int size() const override { return state_->size(); }
  void abort(const std::string& reason) override { state_->abort(reason); }

  WorkPtr broadcast(const Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast", "tensor");
    if (tensor.nbytes() == 0) return Work::completed();
    return launch({tensor}, [&](ncclComm_t comm, cudaStream_t stream) {
      TT_NCCL_CHECK(
          ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.nbytes(), kBytes, root, comm, stream));
    });
  }

  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "all_reduce", "tensor");
    return launch_reduction({tensor}, tensor, op, true,
                            [&](ncclComm_t comm, cudaStream_t stream, const NcclReduction& how) {
                              TT_NCCL_CHECK(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(),
                                                          count_of(tensor, how), how.type, how.op, comm, stream));
                            });
  }

  // In place: NCCL reads every rank's buffer and writes only the root's.
  WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op) override {
    check_tensor(tensor, "reduce", "tensor");
    return launch_reduction({tensor}, tensor, op, rank() == root,
                            [&](ncclComm_t comm, cudaStream_t stream, const NcclReduction& how) {
                              TT_NCCL_CHECK(ncclReduce(tensor.data_ptr(), tensor.data_ptr(), count_of(tensor, how),
                                                       how.type, how.op, root, comm, stream));
                            });
  }

  WorkPtr all_gather(const Tensor& output, const Tensor& input) override {
    check_tensor(output, "all_gather", "output");
    check_tensor(input, "all_gather", "input");
    if (input.nbytes() == 0) return Work::completed();
    return launch({output, input}, [&](ncclComm_t comm, cudaStream_t stream) {
      TT_NCCL_CHECK(ncclAllGather(input.data_ptr(), output.data_ptr(), input.nbytes(), kBytes, comm, stream));
    });
  }

  WorkPtr gather(const Tensor& output, const Tensor& input, int root) override {
    check_tensor(input, "gather", "input");
    if (rank() == root) check_tensor(output, "gather", "output");
    return rooted_exchange(output, input, root, P2POp::Kind::Send);
  }

  WorkPtr scatter(const Tensor& output, const Tensor& input, int root) override {
    check_tensor(output, "scatter", "output");
    if (rank() == root) check_tensor(input, "scatter", "input");
    return rooted_exchange(input, output, root, P2POp::Kind::Recv);
  }

  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override {
    check_tensor(output, "reduce_scatter", "output");
    check_tensor(input, "reduce_scatter", "input");
    return launch_reduction({output, input}, output, op, true,
                            [&](ncclComm_t comm, cudaStream_t stream, const NcclReduction& how) {
                              TT_NCCL_CHECK(ncclReduceScatter(input.data_ptr(), output.data_ptr(),
                                                              count_of(output, how), how.type, how.op, comm, stream));
                            });
  }

  // Empty blocks are skipped on both sides: the sender's count for a pair is the receiver's.
  WorkPtr all_to_all(const Tensor& output, const Tensor& input, std::span<const std::int64_t> output_counts,
                     std::span<const std::int64_t> input_counts) override {
    check_tensor(output, "all_to_all", "output");
    check_tensor(input, "all_to_all", "input");
    check_counts(output_counts, "output_counts");
    check_counts(input_counts, "input_counts");
    const std::size_t itemsize = input.itemsize();
    return launch({output, input}, [&](ncclComm_t comm, cudaStream_t stream) {
      NcclGroup group;
      std::size_t sent = 0;
      std::size_t received = 0;
      for (int peer = 0; peer < size(); ++peer) {
        const auto index = static_cast<std::size_t>(peer);
        const std::size_t send_bytes = static_cast<std::size_t>(input_counts[index]) * itemsize;
        const std::size_t recv_bytes = static_cast<std::size_t>(output_counts[index]) * itemsize;
        if (send_bytes > 0) post(P2POp::Kind::Send, first_byte(input) + sent, send_bytes, peer, comm, stream);
        if (recv_bytes > 0) post(P2POp::Kind::Recv, first_byte(output) + received, recv_bytes, peer, comm, stream);
        sent += send_bytes;
        received += recv_bytes;
      }
      group.end();
    });
  }

  // NCCL has no tags: messages between two ranks match in the order they were posted.
  WorkPtr send(const Tensor& tensor, int dst, int) override {
    check_tensor(tensor, "send", "tensor");
    if (tensor.nbytes() == 0) return Work::completed();
    return launch({tensor}, [&](ncclComm_t comm, cudaStream_t stream) {
      post(P2POp::Kind::Send, tensor.data_ptr(), tensor.nbytes(), dst, comm, stream);
    });
  }

  WorkPtr recv(const Tensor& tensor, int src, int) override {
    check_source(src, "recv");
    check_tensor(tensor, "recv", "tensor");
    if (tensor.nbytes() == 0) return Work::completed();
    return launch({tensor}, [&](ncclComm_t comm, cudaStream_t stream) {
      post(P2POp::Kind::Recv, tensor.data_ptr(), tensor.nbytes(), src, comm, stream);
    });
  }

  WorkPtr batch_p2p(std::span<const P2POp> ops) override {
    std::vector<Tensor> tensors;
    tensors.reserve(ops.size());
    for (const P2POp& op : ops) {
      if (op.kind == P2POp::Kind::Recv) check_source(op.peer, "batch_p2p");
      check_tensor(op.tensor, "batch_p2p", op.kind == P2POp::Kind::Send ? "send tensor" : "recv tensor");
      tensors.push_back(op.tensor);
    }
    return launch(std::move(tensors), [&](ncclComm_t comm, cudaStream_t stream) {
      NcclGroup group;
      for (const P2POp& op : ops) {
        if (op.tensor.nbytes() > 0) post(op.kind, op.tensor.data_ptr(), op.tensor.nbytes(), op.peer, comm, stream);
      }
      group.end();
    });
  }

  // A one-byte all_reduce: it completes on a rank only after every rank has joined it.
  WorkPtr barrier() override {
    return launch({barrier_token_}, [&](ncclComm_t comm, cudaStream_t stream) {
      TT_NCCL_CHECK(ncclAllReduce(barrier_token_.data_ptr(), barrier_token_.data_ptr(), 1, ncclUint8, ncclSum,
                                  comm, stream));
    });
  }

 private:
  // gather and scatter as grouped sends and receives: every rank moves its `own` block in
  // direction `own_moves` (Send: to the root), and the root moves one block of `all` the other way
  // with every rank, itself included.
  WorkPtr rooted_exchange(const Tensor& all, const Tensor& own, int root, P2POp::Kind own_moves) {
    const std::size_t block = own.nbytes();
    if (block == 0) return Work::completed();
    const P2POp::Kind all_moves = own_moves == P2POp::Kind::Send ? P2POp::Kind::Recv : P2POp::Kind::Send;
    const bool is_root = rank() == root;
    return launch({all, own}, [&](ncclComm_t comm, cudaStream_t stream) {
      NcclGroup group;
      for (int peer = 0; is_root && peer < size(); ++peer) {
        post(all_moves, first_byte(all) + block * static_cast<std::size_t>(peer), block, peer, comm, stream);
      }
      post(own_moves, own.data_ptr(), block, root, comm, stream);
      group.end();
    });
  }

  // What every reduction does around its NCCL call: NCCL's way to reduce `result`'s dtype with
  // `op` (NotSupported before anything is queued), nothing to do for an empty tensor, and AVG's
  // division of `result` afterwards where this NCCL needs it and this rank holds a result.
  template <class Enqueue>
  WorkPtr launch_reduction(std::vector<Tensor> tensors, const Tensor& result, ReduceOp op, bool holds_result,
                           Enqueue&& enqueue) {
    const NcclReduction how = reduction_for(result.dtype(), op);
    if (result.nbytes() == 0) return Work::completed();
    return launch(
        std::move(tensors), [&](ncclComm_t comm, cudaStream_t stream) { enqueue(comm, stream, how); },
        holds_result ? divide_after(how, result, size()) : nullptr);
  }

  template <class Enqueue>
  WorkPtr launch(std::vector<Tensor> tensors, Enqueue&& enqueue, std::function<void()> then = nullptr) {
    cuda::DeviceGuard guard(state_->device());
    // The Work exists before anything is queued, so no failure can leave buffers in use unowned.
    auto work = std::make_shared<NcclWork>(state_, make_event(), std::move(tensors));
    state_->run(work->done_event(), std::forward<Enqueue>(enqueue));
    if (then) return Work::then(std::move(work), std::move(then));
    return work;
  }

  // Only this backend knows the group's device, and NCCL's kernels would take memory on another
  // device for this one's.
  void check_tensor(const Tensor& tensor, std::string_view op, std::string_view name) const {
    const Device expected = Device::cuda(state_->device());
    if (tensor.defined() && tensor.device() == expected && tensor.is_contiguous()) return;
    std::string got = "an undefined tensor";
    if (tensor.defined()) {
      got = fmt::format("{} on {}", tensor.is_contiguous() ? "a tensor" : "a non-contiguous tensor", tensor.device());
    }
    throw InvalidArgument(fmt::format("nccl {}: {} must be a contiguous tensor on {} (the group's device), got {}", op,
                                      name, expected, got));
  }

  // Checked before NCCL's group opens, where the counts are read and nothing else may throw.
  void check_counts(std::span<const std::int64_t> counts, std::string_view name) const {
    if (counts.size() != static_cast<std::size_t>(size())) {
      throw InvalidArgument(fmt::format("nccl all_to_all: {} holds {} counts for a group of size {}", name,
                                        counts.size(), size()));
    }
  }

  static void check_source(int src, std::string_view op) {
    if (src == kAnySource) {
      throw NotSupported(fmt::format("nccl does not support {} from any source: NCCL matches a receive to one named "
                                     "peer", op));
    }
  }

  std::shared_ptr<NcclState> state_;
  Tensor barrier_token_;
};

void check_arguments(int rank, int size, int device) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw InvalidArgument(fmt::format("make_nccl_backend: rank {} is not a rank of a group of size {}", rank, size));
  }
  const int devices = cuda_device_count();
  if (device < 0 || device >= devices) {
    throw InvalidArgument(fmt::format("make_nccl_backend: rank {} asked for cuda:{} but {} CUDA devices are usable",
                                      rank, device, devices));
  }
}

}  // namespace

std::unique_ptr<Engine> make_nccl_backend(
    int rank, int size, int device, std::chrono::milliseconds timeout,
    const std::function<void(std::span<std::byte>)>& broadcast_unique_id) {
  check_arguments(rank, size, device);
  cuda::DeviceGuard guard(device);  // NCCL binds the communicator to the current device
  ncclUniqueId id{};
  if (rank == 0) TT_NCCL_CHECK(ncclGetUniqueId(&id));
  broadcast_unique_id(std::as_writable_bytes(std::span(id.internal)));
  return std::make_unique<NcclBackend>(std::make_shared<NcclState>(rank, size, device, timeout, id));
}

}  // namespace tensortree::detail

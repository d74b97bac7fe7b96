// NcclBackend: every Backend operation through one NCCL communicator, on the backend's own CUDA
// stream. See nccl_backend.hpp for the ordering and completion contract.
#include "dist/nccl_backend.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device_guard.hpp"
#include "dist/nccl_check.hpp"
#include "element_convert.hpp"
#include "tensortree/device.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// ---- handles -----------------------------------------------------------------------------------

struct StreamDeleter {
  void operator()(cudaStream_t stream) const noexcept { cudaStreamDestroy(stream); }
};
struct EventDeleter {
  void operator()(cudaEvent_t event) const noexcept { cudaEventDestroy(event); }
};
using CudaStream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using CudaEvent = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;

// On the current device. Non-blocking: the legacy default stream does not wait for NCCL's work,
// so a receive that waits for a peer never stalls the library's copies.
CudaStream make_stream() {
  cudaStream_t stream = nullptr;
  TT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return CudaStream(stream);
}

// On the current device. These events only order work and mark completion: no timing needed.
CudaEvent make_event() {
  cudaEvent_t event = nullptr;
  TT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return CudaEvent(event);
}

// True once every operation recorded before `event` has finished.
bool event_reached(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is no failure: keep it from surfacing in a later check
    return false;
  }
  throw_foreign_error("CUDA", "cudaEventQuery", cudaGetErrorString(status), static_cast<long>(status),
                      __FILE__, __LINE__);
}

// Owns the ncclComm_t. Destroyed normally, unless an error made it abort first.
class NcclComm {
 public:
  NcclComm(int rank, int size, const ncclUniqueId& id) {
    TT_NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  ncclComm_t get() const { return comm_; }
  bool aborted() const { return comm_ == nullptr; }
  // After an asynchronous error NCCL's kernels may wait forever for a peer; aborting makes them
  // exit and frees the communicator.
  void abort() noexcept {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  ncclComm_t comm_ = nullptr;
};

// ncclGroupStart/End for a scope. When a call inside the group fails, NCCL marks the group failed
// and ncclGroupEnd discards what was queued, so closing it while unwinding launches nothing.
// Hence nothing but NCCL calls may throw between the two.
class NcclGroup {
 public:
  NcclGroup() { TT_NCCL_CHECK(ncclGroupStart()); }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  ~NcclGroup() {
    if (open_) ncclGroupEnd();
  }

  void end() {
    open_ = false;
    TT_NCCL_CHECK(ncclGroupEnd());
  }

 private:
  bool open_ = true;
};

// ---- shared state ------------------------------------------------------------------------------

// What a backend and its Works share, so that a Work may outlive the backend that returned it.
class NcclState {
 public:
  // With `device` current.
  NcclState(int rank, int size, int device, const ncclUniqueId& id)
      : rank_(rank),
        size_(size),
        device_(device),
        stream_(make_stream()),
        producer_(make_event()),
        comm_(rank, size, id) {}

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }

  // Queues `enqueue(comm, stream)` behind the work already on the legacy default stream and
  // records `done` after it. With the backend's device current.
  template <class Enqueue>
  void run(cudaEvent_t done, Enqueue&& enqueue) {
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    // The caller's tensors were written on the legacy default stream, where the library's copies
    // and kernels run; the operation must see those values.
    TT_CUDA_CHECK(cudaEventRecord(producer_.get(), cudaStreamLegacy));
    TT_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), producer_.get(), 0));
    enqueue(comm_.get(), stream_.get());
    TT_CUDA_CHECK(cudaEventRecord(done, stream_.get()));
  }

  // Throws BackendError if NCCL has hit an asynchronous error (aborting the communicator) or the
  // communicator was aborted earlier.
  void check_async_error() {
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    ncclResult_t status = ncclSuccess;
    TT_NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &status));
    if (status == ncclSuccess || status == ncclInProgress) return;
    const std::string text = nccl_error_text(status) + " (" + where() + "; the communicator was aborted)";
    comm_.abort();
    throw_foreign_error("NCCL", "ncclCommGetAsyncError", text, static_cast<long>(status), __FILE__, __LINE__);
  }

 private:
  std::string where() const {
    return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
           " on cuda:" + std::to_string(device_);
  }

  void throw_if_aborted() const {
    if (comm_.aborted()) {
      throw BackendError("the NCCL communicator of " + where() +
                         " was aborted after an earlier error; create a new group");
    }
  }

  const int rank_;
  const int size_;
  const int device_;
  std::mutex mutex_;  // NCCL communicators are not thread-safe
  CudaStream stream_;
  CudaEvent producer_;  // reused: a stream wait captures the event's state when it is called
  NcclComm comm_;       // declared last: destroyed before the stream its operations ran on
};

// ---- Work --------------------------------------------------------------------------------------

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> state, CudaEvent done, std::vector<Tensor> tensors,
           std::function<void()> then)
      : state_(std::move(state)),
        done_(std::move(done)),
        tensors_(std::move(tensors)),
        then_(std::move(then)) {}
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  // Work's contract: an operation in flight is waited for, since the device still uses its buffers.
  ~NcclWork() override {
    if (reached_) return;
    try {
      block();
    } catch (...) {
      // The error was for a waiter to see. After an abort NCCL's kernels exit, so this returns.
      cudaEventSynchronize(done_.get());
    }
  }

  cudaEvent_t done_event() const { return done_.get(); }

 protected:
  // Work::block() polls this, so a wait also notices NCCL's asynchronous errors, which a
  // cudaEventSynchronize on a kernel stuck waiting for a dead peer never would.
  bool test() override {
    if (reached_) return true;
    state_->check_async_error();
    reached_ = event_reached(done_.get());
    return reached_;
  }

  void finish() override {
    tensors_.clear();  // the device is done with them
    if (then_) then_();
  }

 private:
  std::shared_ptr<NcclState> state_;
  CudaEvent done_;
  std::vector<Tensor> tensors_;
  std::function<void()> then_;
  bool reached_ = false;
};

// ---- element types -----------------------------------------------------------------------------

// How a reduction is handed to NCCL.
struct NcclReduction {
  ncclDataType_t type;
  std::size_t lanes;  // NCCL elements per tensor element: 2 for complex (real, imaginary)
  ncclRedOp_t op;
  bool divide_after = false;  // AVG as SUM, divided once complete (NCCL before ncclAvg)
};

std::string nccl_version() {
  return std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
}

[[noreturn]] void cannot_reduce(DType dtype, ReduceOp op, std::string_view why) {
  throw NotSupported("nccl does not support " + std::string(reduce_op_name(op)) + " on " +
                     std::string(dtype_name(dtype)) + " tensors: " + std::string(why));
}

// The NCCL type that computes on `dtype`'s values, where NCCL has one.
std::optional<ncclDataType_t> arithmetic_type(DType dtype) {
  switch (dtype) {
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::UInt32: return ncclUint32;
    case DType::Int32: return ncclInt32;
    case DType::UInt64: return ncclUint64;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
#if TT_NCCL_HAS_BFLOAT16
    case DType::BFloat16: return ncclBfloat16;
#endif
#if TT_NCCL_HAS_FLOAT8
    case DType::Float8_e4m3fn: return ncclFloat8e4m3;
    case DType::Float8_e5m2: return ncclFloat8e5m2;
#endif
    default: return std::nullopt;
  }
}

bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::BitwiseAnd || op == ReduceOp::BitwiseOr || op == ReduceOp::BitwiseXor;
}

// SUM, PRODUCT, MIN, MAX or AVG on NCCL elements of `type`.
NcclReduction arithmetic_reduction(ncclDataType_t type, std::size_t lanes, DType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return {type, lanes, ncclSum};
    case ReduceOp::Product: return {type, lanes, ncclProd};
    case ReduceOp::Min: return {type, lanes, ncclMin};
    case ReduceOp::Max: return {type, lanes, ncclMax};
    case ReduceOp::Avg:
#if TT_NCCL_HAS_AVG
      return {type, lanes, ncclAvg};
#else
      return {type, lanes, ncclSum, true};
#endif
    case ReduceOp::BitwiseAnd:
    case ReduceOp::BitwiseOr:
    case ReduceOp::BitwiseXor: break;
  }
  cannot_reduce(dtype, op, "NCCL has no such reduction");
}

// Bools are bytes holding 0 or 1, and a byte sum could leave 2: SUM is logical OR (MAX) and PRODUCT
// logical AND (MIN), as PyTorch's NCCL backend does.
NcclReduction bool_reduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max: return {ncclUint8, 1, ncclMax};
    case ReduceOp::Product:
    case ReduceOp::Min: return {ncclUint8, 1, ncclMin};
    case ReduceOp::Avg: cannot_reduce(DType::Bool, op, "the mean of booleans is not a boolean");
    case ReduceOp::BitwiseAnd:
    case ReduceOp::BitwiseOr:
    case ReduceOp::BitwiseXor: break;
  }
  cannot_reduce(DType::Bool, op, "NCCL has no such reduction");
}

NcclReduction reduction_for(DType dtype, ReduceOp op) {
  if (is_bitwise(op)) cannot_reduce(dtype, op, "NCCL has no bitwise reductions");
  if (dtype == DType::Bool) return bool_reduction(op);
  if (is_complex(dtype)) {
    // Sums and means are component-wise; NCCL knows no complex product and complex values no order.
    if (op != ReduceOp::Sum && op != ReduceOp::Avg) {
      cannot_reduce(dtype, op, "complex tensors reduce only with SUM and AVG");
    }
    return arithmetic_reduction(dtype == DType::Complex64 ? ncclFloat32 : ncclFloat64, 2, dtype, op);
  }
  const std::optional<ncclDataType_t> type = arithmetic_type(dtype);
  if (!type) cannot_reduce(dtype, op, "NCCL " + nccl_version() + " has no arithmetic on this element type");
  return arithmetic_reduction(*type, 1, dtype, op);
}

// ---- AVG without ncclAvg -----------------------------------------------------------------------

template <class T>
T divided(T value, int divisor) {
  if constexpr (std::is_same_v<T, bool>) {
    return value;  // AVG on bool is refused before it gets here
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(value / static_cast<T>(divisor));  // truncates, as ncclAvg does
  } else if constexpr (std::is_floating_point_v<T>) {
    return value / static_cast<T>(divisor);
  } else if constexpr (is_std_complex<T>) {
    return value / static_cast<typename T::value_type>(divisor);
  } else {
    return T(static_cast<float>(value) / static_cast<float>(divisor));  // Half, BFloat16, float8
  }
}

// Through a host copy: only NCCL before 2.10 needs it, which does not deserve a kernel.
void divide_in_place(const Tensor& tensor, int divisor) {
  const Tensor host = tensor.to(Device::cpu());
  visit_dtype(host.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto* values = static_cast<T*>(host.data_ptr());
    for (std::int64_t i = 0; i < host.numel(); ++i) values[i] = divided(values[i], divisor);
  });
  tensor.copy_(host);
}

// ---- the backend -------------------------------------------------------------------------------

// Data movement hands NCCL bytes: it moves every dtype, and NCCL moves bytes for these anyway.
constexpr ncclDataType_t kBytes = ncclUint8;

std::byte* bytes_of(const Tensor& tensor) { return static_cast<std::byte*>(tensor.data_ptr()); }

std::size_t count_of(const Tensor& tensor, const NcclReduction& reduction) {
  return static_cast<std::size_t>(tensor.numel()) * reduction.lanes;
}

class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(std::shared_ptr<NcclState> state)
      : state_(std::move(state)),
        barrier_token_(Tensor::zeros({1}, {DType::UInt8, Device::cuda(state_->device())})) {}

  std::string_view name() const override { return "nccl"; }
  int rank() const override { return state_->rank(); }
  int size() const override { return state_->size(); }

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
    const NcclReduction reduction = reduction_for(tensor.dtype(), op);
    if (tensor.nbytes() == 0) return Work::completed();
    return launch(
        {tensor},
        [&](ncclComm_t comm, cudaStream_t stream) {
          TT_NCCL_CHECK(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), count_of(tensor, reduction),
                                      reduction.type, reduction.op, comm, stream));
        },
        divide_after(reduction, tensor));
  }

  // In place: NCCL reads every rank's buffer and writes only the root's.
  WorkPtr reduce(const Tensor& tensor, int root, ReduceOp op) override {
    check_tensor(tensor, "reduce", "tensor");
    const NcclReduction reduction = reduction_for(tensor.dtype(), op);
    if (tensor.nbytes() == 0) return Work::completed();
    return launch(
        {tensor},
        [&](ncclComm_t comm, cudaStream_t stream) {
          TT_NCCL_CHECK(ncclReduce(tensor.data_ptr(), tensor.data_ptr(), count_of(tensor, reduction),
                                   reduction.type, reduction.op, root, comm, stream));
        },
        rank() == root ? divide_after(reduction, tensor) : nullptr);
  }

  WorkPtr all_gather(const Tensor& output, const Tensor& input) override {
    check_tensor(output, "all_gather", "output");
    check_tensor(input, "all_gather", "input");
    if (input.nbytes() == 0) return Work::completed();
    return launch({output, input}, [&](ncclComm_t comm, cudaStream_t stream) {
      TT_NCCL_CHECK(ncclAllGather(input.data_ptr(), output.data_ptr(), input.nbytes(), kBytes, comm, stream));
    });
  }

  // Grouped sends and receives: the root receives every block, its own included.
  WorkPtr gather(const Tensor& output, const Tensor& input, int root) override {
    const bool is_root = rank() == root;
    check_tensor(input, "gather", "input");
    if (is_root) check_tensor(output, "gather", "output");
    const std::size_t block = input.nbytes();
    if (block == 0) return Work::completed();
    return launch({output, input}, [&](ncclComm_t comm, cudaStream_t stream) {
      NcclGroup group;
      if (is_root) {
        for (int peer = 0; peer < size(); ++peer) {
          TT_NCCL_CHECK(ncclRecv(bytes_of(output) + block * static_cast<std::size_t>(peer), block, kBytes,
                                 peer, comm, stream));
        }
      }
      TT_NCCL_CHECK(ncclSend(input.data_ptr(), block, kBytes, root, comm, stream));
      group.end();
    });
  }

  WorkPtr scatter(const Tensor& output, const Tensor& input, int root) override {
    const bool is_root = rank() == root;
    check_tensor(output, "scatter", "output");
    if (is_root) check_tensor(input, "scatter", "input");
    const std::size_t block = output.nbytes();
    if (block == 0) return Work::completed();
    return launch({output, input}, [&](ncclComm_t comm, cudaStream_t stream) {
      NcclGroup group;
      if (is_root) {
        for (int peer = 0; peer < size(); ++peer) {
          TT_NCCL_CHECK(ncclSend(bytes_of(input) + block * static_cast<std::size_t>(peer), block, kBytes,
                                 peer, comm, stream));
        }
      }
      TT_NCCL_CHECK(ncclRecv(output.data_ptr(), block, kBytes, root, comm, stream));
      group.end();
    });
  }

  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override {
    check_tensor(output, "reduce_scatter", "output");
    check_tensor(input, "reduce_scatter", "input");
    const NcclReduction reduction = reduction_for(output.dtype(), op);
    if (output.nbytes() == 0) return Work::completed();
    return launch(
        {output, input},
        [&](ncclComm_t comm, cudaStream_t stream) {
          TT_NCCL_CHECK(ncclReduceScatter(input.data_ptr(), output.data_ptr(), count_of(output, reduction),
                                          reduction.type, reduction.op, comm, stream));
        },
        divide_after(reduction, output));
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
        if (send_bytes > 0) {
          TT_NCCL_CHECK(ncclSend(bytes_of(input) + sent, send_bytes, kBytes, peer, comm, stream));
        }
        if (recv_bytes > 0) {
          TT_NCCL_CHECK(ncclRecv(bytes_of(output) + received, recv_bytes, kBytes, peer, comm, stream));
        }
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
      TT_NCCL_CHECK(ncclSend(tensor.data_ptr(), tensor.nbytes(), kBytes, dst, comm, stream));
    });
  }

  WorkPtr recv(const Tensor& tensor, int src, int) override {
    check_source(src, "recv");
    check_tensor(tensor, "recv", "tensor");
    if (tensor.nbytes() == 0) return Work::completed();
    return launch({tensor}, [&](ncclComm_t comm, cudaStream_t stream) {
      TT_NCCL_CHECK(ncclRecv(tensor.data_ptr(), tensor.nbytes(), kBytes, src, comm, stream));
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
        if (op.tensor.nbytes() == 0) continue;
        if (op.kind == P2POp::Kind::Send) {
          TT_NCCL_CHECK(ncclSend(op.tensor.data_ptr(), op.tensor.nbytes(), kBytes, op.peer, comm, stream));
        } else {
          TT_NCCL_CHECK(ncclRecv(op.tensor.data_ptr(), op.tensor.nbytes(), kBytes, op.peer, comm, stream));
        }
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
  template <class Enqueue>
  WorkPtr launch(std::vector<Tensor> tensors, Enqueue&& enqueue, std::function<void()> then = nullptr) {
    cuda::DeviceGuard guard(state_->device());
    // The Work exists before anything is queued, so no failure can leave buffers in use unowned.
    auto work = std::make_shared<NcclWork>(state_, make_event(), std::move(tensors), std::move(then));
    state_->run(work->done_event(), std::forward<Enqueue>(enqueue));
    return work;
  }

  std::function<void()> divide_after(const NcclReduction& reduction, const Tensor& tensor) const {
    if (!reduction.divide_after) return nullptr;
    return [tensor, divisor = size()] { divide_in_place(tensor, divisor); };
  }

  // Only this backend knows the group's device, and NCCL's kernels would take memory on another
  // device for this one's.
  void check_tensor(const Tensor& tensor, std::string_view op, std::string_view name) const {
    const Device expected = Device::cuda(state_->device());
    if (tensor.defined() && tensor.device() == expected && tensor.is_contiguous()) return;
    std::string got = "an undefined tensor";
    if (tensor.defined()) {
      got = (tensor.is_contiguous() ? "a tensor on " : "a non-contiguous tensor on ") + tensor.device().str();
    }
    throw InvalidArgument("nccl " + std::string(op) + ": " + std::string(name) +
                          " must be a contiguous tensor on " + expected.str() +
                          " (the group's device), got " + got);
  }

  // Checked before NCCL's group opens, where the counts are read and nothing else may throw.
  void check_counts(std::span<const std::int64_t> counts, std::string_view name) const {
    if (counts.size() != static_cast<std::size_t>(size())) {
      throw InvalidArgument("nccl all_to_all: " + std::string(name) + " holds " +
                            std::to_string(counts.size()) + " counts for a group of size " +
                            std::to_string(size()));
    }
  }

  static void check_source(int src, std::string_view op) {
    if (src == kAnySource) {
      throw NotSupported("nccl does not support " + std::string(op) +
                         " from any source: NCCL matches a receive to one named peer");
    }
  }

  std::shared_ptr<NcclState> state_;
  Tensor barrier_token_;
};

void check_arguments(int rank, int size, int device) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw InvalidArgument("make_nccl_backend: rank " + std::to_string(rank) +
                          " is not a rank of a group of size " + std::to_string(size));
  }
  const int devices = cuda_device_count();
  if (device < 0 || device >= devices) {
    throw InvalidArgument("make_nccl_backend: rank " + std::to_string(rank) +
                          " asked for cuda:" + std::to_string(device) + " but " + std::to_string(devices) +
                          " CUDA devices are usable");
  }
}

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(
    int rank, int size, int device, const std::function<void(std::span<std::byte>)>& broadcast_unique_id) {
  check_arguments(rank, size, device);
  cuda::DeviceGuard guard(device);  // NCCL binds the communicator to the current device
  ncclUniqueId id{};
  if (rank == 0) TT_NCCL_CHECK(ncclGetUniqueId(&id));
  broadcast_unique_id(std::as_writable_bytes(std::span(id.internal)));
  return std::make_unique<NcclBackend>(std::make_shared<NcclState>(rank, size, device, id));
}

}  // namespace tensortree::detail

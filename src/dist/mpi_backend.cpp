#include "dist/mpi_backend.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "dist/mpi_check.hpp"
#include "element_convert.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// ---- element types --------------------------------------------------------------------------------

// The MPI type of one element. The 16- and 8-bit floats travel as their bits; MPI cannot reduce
// them, so reductions use the widening operations below.
MPI_Datatype element_datatype(DType dtype) {
  switch (dtype) {
    case DType::Bool: return MPI_C_BOOL;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::UInt16: return MPI_UINT16_T;
    case DType::UInt32: return MPI_UINT32_T;
    case DType::UInt64: return MPI_UINT64_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::Int16: return MPI_INT16_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Float16: return MPI_UINT16_T;
    case DType::BFloat16: return MPI_UINT16_T;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Complex64: return MPI_C_FLOAT_COMPLEX;
    case DType::Complex128: return MPI_C_DOUBLE_COMPLEX;
    case DType::Float8_e4m3fn: return MPI_UINT8_T;
    case DType::Float8_e5m2: return MPI_UINT8_T;
  }
  throw_invalid_dtype(dtype);
}

bool is_widened(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float8_e4m3fn ||
         dtype == DType::Float8_e5m2;
}

// ---- derived datatypes for counts beyond max_count --------------------------------------------------

MpiDatatype committed(MpiDatatype datatype) {
  MPI_Datatype raw = datatype.get();
  TT_MPI_CHECK(MPI_Type_commit(&raw));
  return datatype;
}

// One datatype covering `elements` consecutive elements, whose extent is exactly their bytes (so
// that block r of a gather lands at r times the block size).
MpiDatatype contiguous_datatype(std::int64_t elements, MPI_Datatype element, std::int64_t max_count) {
  const std::int64_t full_chunks = elements / max_count;
  const std::int64_t rest = elements % max_count;
  if (full_chunks > INT_MAX) {
    throw NotSupported("mpi backend cannot describe " + std::to_string(elements) + " elements in one message");
  }
  MPI_Aint lower_bound = 0;
  MPI_Aint extent = 0;
  TT_MPI_CHECK(MPI_Type_get_extent(element, &lower_bound, &extent));
  const int chunk = static_cast<int>(max_count);
  MPI_Datatype raw = MPI_DATATYPE_NULL;
  TT_MPI_CHECK(MPI_Type_vector(static_cast<int>(full_chunks), chunk, chunk, element, &raw));
  const MpiDatatype chunks(raw);
  TT_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(rest), element, &raw));
  const MpiDatatype tail(raw);
  int lengths[2] = {1, 1};
  MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(full_chunks * max_count) * extent};
  MPI_Datatype parts[2] = {chunks.get(), tail.get()};
  TT_MPI_CHECK(MPI_Type_create_struct(rest > 0 ? 2 : 1, lengths, displacements, parts, &raw));
  const MpiDatatype joined(raw);
  TT_MPI_CHECK(MPI_Type_create_resized(joined.get(), 0, static_cast<MPI_Aint>(elements) * extent, &raw));
  return committed(MpiDatatype(raw));
}

// `elements` consecutive elements starting `offset` elements into a buffer (alltoallw's blocks).
MpiDatatype positioned_datatype(std::int64_t offset, std::int64_t elements, MPI_Datatype element,
                                std::int64_t max_count) {
  MPI_Datatype raw = MPI_DATATYPE_NULL;
  MpiDatatype block;
  if (elements <= max_count) {
    TT_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(elements), element, &raw));
    block = MpiDatatype(raw);
  } else {
    block = contiguous_datatype(elements, element, max_count);
  }
  MPI_Aint lower_bound = 0;
  MPI_Aint extent = 0;
  TT_MPI_CHECK(MPI_Type_get_extent(element, &lower_bound, &extent));
  int length = 1;
  MPI_Aint displacement = static_cast<MPI_Aint>(offset) * extent;
  MPI_Datatype inner = block.get();
  TT_MPI_CHECK(MPI_Type_create_struct(1, &length, &displacement, &inner, &raw));
  return committed(MpiDatatype(raw));
}

// ---- reductions MPI lacks: widen to float, combine, narrow -----------------------------------------

struct Add {
  float operator()(float a, float b) const { return a + b; }
};
struct Multiply {
  float operator()(float a, float b) const { return a * b; }
};
// NaN wins, as in torch.minimum / torch.maximum.
struct Minimum {
  float operator()(float a, float b) const { return std::isnan(a) || a < b ? a : b; }
};
struct Maximum {
  float operator()(float a, float b) const { return std::isnan(a) || a > b ? a : b; }
};

template <class T, class Combine>
void combine_widened(void* incoming, void* accumulated, int* length, MPI_Datatype*) {
  const T* in = static_cast<const T*>(incoming);
  T* inout = static_cast<T*>(accumulated);
  for (int i = 0; i < *length; ++i) {
    inout[i] = T(Combine{}(static_cast<float>(in[i]), static_cast<float>(inout[i])));
  }
}

template <class T>
MPI_User_function* widened_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &combine_widened<T, Add>;
    case ReduceOp::Product: return &combine_widened<T, Multiply>;
    case ReduceOp::Min: return &combine_widened<T, Minimum>;
    case ReduceOp::Max: return &combine_widened<T, Maximum>;
    default: break;
  }
  throw InvalidArgument("no widened reduction for " + std::string(reduce_op_name(op)));
}

MPI_User_function* widened_function(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::Float16: return widened_function<Half>(op);
    case DType::BFloat16: return widened_function<BFloat16>(op);
    case DType::Float8_e4m3fn: return widened_function<Float8E4M3FN>(op);
    case DType::Float8_e5m2: return widened_function<Float8E5M2>(op);
    default: break;
  }
  throw InvalidArgument("no widened reduction for " + std::string(dtype_name(dtype)));
}

// Reductions of bool are logical: any (SUM, MAX, BOR), all (PRODUCT, MIN, BAND), parity (BXOR).
MPI_Op logical_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max:
    case ReduceOp::BitwiseOr: return MPI_LOR;
    case ReduceOp::Product:
    case ReduceOp::Min:
    case ReduceOp::BitwiseAnd: return MPI_LAND;
    case ReduceOp::BitwiseXor: return MPI_LXOR;
    case ReduceOp::Avg: break;
  }
  throw InvalidArgument("no logical reduction for " + std::string(reduce_op_name(op)));
}

MPI_Op predefined_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Product: return MPI_PROD;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::BitwiseAnd: return MPI_BAND;
    case ReduceOp::BitwiseOr: return MPI_BOR;
    case ReduceOp::BitwiseXor: return MPI_BXOR;
    case ReduceOp::Avg: break;
  }
  throw InvalidArgument("no MPI operation for " + std::string(reduce_op_name(op)));
}

bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::BitwiseAnd || op == ReduceOp::BitwiseOr || op == ReduceOp::BitwiseXor;
}

// Why `dtype` cannot be reduced with `op`, or empty when it can.
std::string unreducible_reason(DType dtype, ReduceOp op) {
  if (is_bitwise(op) && !is_integral(dtype) && dtype != DType::Bool) {
    return "bitwise operations need integer or bool tensors";
  }
  if (is_complex(dtype) && (op == ReduceOp::Min || op == ReduceOp::Max)) return "complex numbers have no order";
  if (dtype == DType::Bool && op == ReduceOp::Avg) return "a bool tensor has no average";
  return {};
}

// ---- averaging ----------------------------------------------------------------------------------------

template <class T>
T divided(T value, int divisor) {
  if constexpr (is_std_complex<T>) {
    return value / static_cast<typename T::value_type>(divisor);
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return static_cast<T>(static_cast<std::int64_t>(value) / divisor);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::uint64_t>(value) / static_cast<std::uint64_t>(divisor));
  } else if constexpr (std::is_floating_point_v<T>) {
    return value / static_cast<T>(divisor);
  } else {
    return T(static_cast<float>(value) / static_cast<float>(divisor));  // Half, BFloat16, Float8*
  }
}

void divide_in_place(const Tensor& tensor, int divisor) {
  visit_dtype(tensor.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw NotSupported("a bool tensor has no average");
    } else {
      T* values = static_cast<T*>(tensor.data_ptr());
      const std::int64_t count = tensor.numel();
      for (std::int64_t i = 0; i < count; ++i) values[i] = divided(values[i], divisor);
    }
  });
}

// ---- the Work -----------------------------------------------------------------------------------------

// The requests of one operation and everything they read or write (tensors, derived datatypes,
// count arrays), kept until they complete.
class MpiWork final : public Work {
 public:
  explicit MpiWork(int rank) : rank_(rank) {}
  MpiWork(const MpiWork&) = delete;
  MpiWork& operator=(const MpiWork&) = delete;
  ~MpiWork() override;

  void keep(const Tensor& tensor) {
    if (tensor.defined()) tensors_.push_back(tensor);
  }
  MPI_Datatype keep(MpiDatatype datatype) {
    datatypes_.push_back(std::move(datatype));
    return datatypes_.back().get();
  }
  // Nonblocking collectives read their count and displacement arrays until they complete.
  template <class T>
  const T* keep(std::vector<T> array) {
    auto held = std::make_shared<const std::vector<T>>(std::move(array));
    const T* data = held->data();
    arrays_.push_back(std::move(held));
    return data;
  }

  // Where the next MPI call writes its request. The slot exists before the call, so that nothing
  // can fail between posting a transfer and recording it.
  MPI_Request* request_slot() {
    requests_.push_back(MPI_REQUEST_NULL);
    return &requests_.back();
  }
  // As request_slot, for a receive whose length is checked on completion; it is cancelled if the
  // Work is dropped first.
  MPI_Request* receive_slot(MPI_Datatype datatype, std::int64_t expected_elements, bool any_source) {
    receives_.push_back({requests_.size(), datatype, expected_elements, any_source});
    return request_slot();
  }
  void on_finish(std::function<void()> step) { finish_steps_.push_back(std::move(step)); }

  int source_rank() const override;

 protected:
  bool test() override;
  void block() override;
  void finish() override;

 private:
  struct Receive {
    std::size_t request;
    MPI_Datatype datatype;
    std::int64_t expected_elements;
    bool any_source;
  };

  void check_status(int status, const char* call) const;
  [[noreturn]] void raise(int error, const char* call) const;
  void check_receive(const Receive& receive) const;

  int rank_;
  std::vector<MPI_Request> requests_;
  std::vector<MPI_Status> statuses_;
  std::vector<Receive> receives_;
  std::vector<Tensor> tensors_;
  std::vector<MpiDatatype> datatypes_;
  std::vector<std::shared_ptr<const void>> arrays_;
  std::vector<std::function<void()>> finish_steps_;
  int source_ = -1;
};

MpiWork::~MpiWork() {
  if (mpi_is_finalized()) return;
  // A receive nobody will match would block forever; collectives and sends cannot be cancelled
  // and are waited for (their peers are bound to take part).
  for (const Receive& receive : receives_) {
    if (requests_[receive.request] != MPI_REQUEST_NULL) MPI_Cancel(&requests_[receive.request]);
  }
  for (MPI_Request& request : requests_) MPI_Wait(&request, MPI_STATUS_IGNORE);  // see block()
}

bool MpiWork::test() {
  statuses_.resize(requests_.size());
  int done = 0;
  check_status(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, statuses_.data()),
               "MPI_Testall");
  return done != 0;
}

// One MPI_Wait per request rather than MPI_Waitall: Open MPI 4.1's MPI_Waitall can spin forever
// once a request has failed (a truncated receive) while other messages are arriving.
void MpiWork::block() {
  statuses_.resize(requests_.size());
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    check_status(MPI_Wait(&requests_[i], &statuses_[i]), "MPI_Wait");
  }
}

// MPI_ERR_IN_STATUS means the real error sits in one request's status.
void MpiWork::check_status(int status, const char* call) const {
  if (status == MPI_ERR_IN_STATUS) {
    for (const MPI_Status& each : statuses_) {
      if (each.MPI_ERROR != MPI_SUCCESS && each.MPI_ERROR != MPI_ERR_PENDING) raise(each.MPI_ERROR, call);
    }
  }
  if (status != MPI_SUCCESS) raise(status, call);
}

// A message longer than the receiving tensor is a mismatch of the caller's, as a shorter one is
// (check_receive); everything else is MPI's failure.
void MpiWork::raise(int error, const char* call) const {
  int error_class = error;
  MPI_Error_class(error, &error_class);
  if (error_class == MPI_ERR_TRUNCATE) {
    std::string message = "rank " + std::to_string(rank_);
    message += " received a message longer than the receiving tensor (";
    message += call;
    message += ": MPI_ERR_TRUNCATE)";
    throw InvalidArgument(message);
  }
  throw_mpi_error(error, call, __FILE__, __LINE__);
}

// A message shorter than the receiving tensor completes without error in MPI; it is an error here.
void MpiWork::check_receive(const Receive& receive) const {
  const MPI_Status& status = statuses_[receive.request];
  MPI_Count received = 0;
  TT_MPI_CHECK(MPI_Get_elements_x(&status, receive.datatype, &received));
  if (received != receive.expected_elements) {
    throw InvalidArgument("rank " + std::to_string(rank_) + " received " + std::to_string(received) +
                          " elements from rank " + std::to_string(status.MPI_SOURCE) + " (tag " +
                          std::to_string(status.MPI_TAG) + ") into a tensor of " +
                          std::to_string(receive.expected_elements) + " elements");
  }
}

void MpiWork::finish() {
  for (const Receive& receive : receives_) {
    check_receive(receive);
    if (receive.any_source && source_ < 0) source_ = statuses_[receive.request].MPI_SOURCE;
  }
  for (const auto& step : finish_steps_) step();
}

int MpiWork::source_rank() const {
  if (source_ < 0) {
    throw NotSupported("source_rank is known only once a receive from kAnySource has completed");
  }
  return source_;
}

// ---- buffers -------------------------------------------------------------------------------------------

// A count and datatype that describe `elements` elements as one message.
struct Block {
  int count;
  MPI_Datatype datatype;
};

Block block_of(std::int64_t elements, DType dtype, std::int64_t max_count, MpiWork& work) {
  const MPI_Datatype element = element_datatype(dtype);
  if (elements <= max_count) return {static_cast<int>(elements), element};
  return {1, work.keep(contiguous_datatype(elements, element, max_count))};
}

std::byte* element_at(const Tensor& tensor, std::int64_t element) {
  return static_cast<std::byte*>(tensor.data_ptr()) + static_cast<std::size_t>(element) * tensor.itemsize();
}

// Calls post(first element, count) for consecutive chunks of at most max_count elements (once for
// an empty tensor, so every rank posts the same number of calls).
template <class Post>
void for_each_chunk(std::int64_t elements, std::int64_t max_count, Post&& post) {
  std::int64_t offset = 0;
  do {
    const std::int64_t count = std::min(max_count, elements - offset);
    post(offset, static_cast<int>(count));
    offset += count;
  } while (offset < elements);
}

std::vector<std::int64_t> displacements_of(std::span<const std::int64_t> counts) {
  std::vector<std::int64_t> displacements(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), displacements.begin(), std::int64_t{0});
  return displacements;
}

std::vector<int> as_ints(std::span<const std::int64_t> values) { return {values.begin(), values.end()}; }

// One side of an all_to_all in MPI_Ialltoallw's terms: per block, a count of 0 or 1 of a datatype
// that starts at the block's byte offset (so every displacement is 0).
struct PlacedBlocks {
  const int* counts;
  const MPI_Datatype* datatypes;
};

PlacedBlocks placed_blocks(std::span<const std::int64_t> counts, MPI_Datatype element, std::int64_t max_count,
                           MpiWork& work) {
  std::vector<int> present;
  std::vector<MPI_Datatype> datatypes;
  std::int64_t offset = 0;
  for (const std::int64_t count : counts) {
    present.push_back(count > 0 ? 1 : 0);
    datatypes.push_back(work.keep(positioned_datatype(offset, count, element, max_count)));
    offset += count;
  }
  return {work.keep(std::move(present)), work.keep(std::move(datatypes))};
}

// ---- argument checks ---------------------------------------------------------------------------------
// dist_ops validates what the caller passed; these guard what would otherwise let MPI write outside
// a buffer or read device memory, and name the rank, the operation and the sizes involved.
class Check {
 public:
  Check(int rank, int size, std::string_view operation) : rank_(rank), size_(size), operation_(operation) {}

  void host(const Tensor& tensor, std::string_view argument) const {
    if (!tensor.defined()) fail(std::string(argument) + " is undefined");
    if (!tensor.device().is_cpu()) {
      fail(std::string(argument) + " is on " + tensor.device().str() + "; MPI moves host memory");
    }
    if (!tensor.is_contiguous()) fail(std::string(argument) + " is not contiguous");
  }

  void elements(const Tensor& tensor, std::int64_t expected, std::string_view argument) const {
    if (tensor.numel() != expected) {
      fail(std::string(argument) + " has " + std::to_string(tensor.numel()) + " elements, expected " +
           std::to_string(expected));
    }
  }

  void same_dtype(const Tensor& tensor, DType expected, std::string_view argument) const {
    if (tensor.dtype() != expected) {
      fail(std::string(argument) + " is " + std::string(dtype_name(tensor.dtype())) + ", expected " +
           std::string(dtype_name(expected)));
    }
  }

  void group_rank(int peer, std::string_view argument) const {
    if (peer < 0 || peer >= size_) {
      fail(std::string(argument) + " " + std::to_string(peer) + " is outside the group of " +
           std::to_string(size_) + " ranks");
    }
  }

  void tag(int tag, int upper_bound) const {
    if (tag < 0 || tag > upper_bound) {
      fail("tag " + std::to_string(tag) + " is outside 0.." + std::to_string(upper_bound));
    }
  }

  void counts(std::span<const std::int64_t> counts, const Tensor& tensor, std::string_view argument) const {
    if (counts.size() != static_cast<std::size_t>(size_)) {
      fail(std::string(argument) + " has " + std::to_string(counts.size()) + " entries, expected " +
           std::to_string(size_));
    }
    if (std::any_of(counts.begin(), counts.end(), [](std::int64_t count) { return count < 0; })) {
      fail(std::string(argument) + " holds a negative count");
    }
    const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    if (tensor.numel() != total) {
      fail(std::string(argument) + " add up to " + std::to_string(total) + " elements but the tensor has " +
           std::to_string(tensor.numel()));
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument("mpi backend " + std::string(operation_) + " on rank " + std::to_string(rank_) + ": " +
                          what);
  }

  int rank_;
  int size_;
  std::string_view operation_;
};

}  // namespace

// ---- MpiBackend ------------------------------------------------------------------------------------------

MpiBackend::MpiBackend(MPI_Comm comm, MpiBackendOptions options) : comm_(comm), options_(options) {
  if (options_.max_count < 1 || options_.max_count > INT_MAX) {
    throw InvalidArgument("MpiBackendOptions::max_count must be in 1.." + std::to_string(INT_MAX) + ", got " +
                          std::to_string(options_.max_count));
  }
  TT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  TT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  void* tag_upper_bound = nullptr;
  int present = 0;
  TT_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_upper_bound, &present));
  if (present) tag_upper_bound_ = *static_cast<int*>(tag_upper_bound);
}

MpiReduction MpiBackend::reduction(DType dtype, ReduceOp op) {
  if (const std::string reason = unreducible_reason(dtype, op); !reason.empty()) {
    throw NotSupported("mpi backend on rank " + std::to_string(rank_) + " cannot reduce " +
                       std::string(dtype_name(dtype)) + " tensors with " + std::string(reduce_op_name(op)) +
                       ": " + reason);
  }
  const bool average = op == ReduceOp::Avg;
  const ReduceOp combine = average ? ReduceOp::Sum : op;
  if (dtype == DType::Bool) return {MPI_C_BOOL, logical_op(combine), false};
  if (is_widened(dtype)) return {element_datatype(dtype), widened_op(dtype, combine), average};
  return {element_datatype(dtype), predefined_op(combine), average};
}

MPI_Op MpiBackend::widened_op(DType dtype, ReduceOp op) {
  const std::lock_guard lock(ops_mutex_);
  auto found = widened_ops_.find({dtype, op});
  if (found == widened_ops_.end()) {
    MPI_Op raw = MPI_OP_NULL;
    TT_MPI_CHECK(MPI_Op_create(widened_function(dtype, op), 1, &raw));
    found = widened_ops_.emplace(std::pair{dtype, op}, MpiOp(raw)).first;
  }
  return found->second.get();
}

WorkPtr MpiBackend::broadcast(const Tensor& tensor, int root) {
  const Check check(rank_, size_, "broadcast");
  check.host(tensor, "tensor");
  check.group_rank(root, "root");
  auto work = std::make_shared<MpiWork>(rank_);
  work->keep(tensor);
  const Block block = block_of(tensor.numel(), tensor.dtype(), options_.max_count, *work);
  TT_MPI_CHECK(MPI_Ibcast(tensor.data_ptr(), block.count, block.datatype, root, comm_, work->request_slot()));
  return work;
}

WorkPtr MpiBackend::all_reduce(const Tensor& tensor, ReduceOp op) {
  const Check check(rank_, size_, "all_reduce");
  check.host(tensor, "tensor");
  const MpiReduction how = reduction(tensor.dtype(), op);
  auto work = std::make_shared<MpiWork>(rank_);
  work->keep(tensor);
  for_each_chunk(tensor.numel(), options_.max_count, [&](std::int64_t offset, int count) {
    TT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, element_at(tensor, offset), count, how.datatype, how.op, comm_,
                                work->request_slot()));
  });
  if (how.average) work->on_finish([tensor, size = size_] { divide_in_place(tensor, size); });
  return work;
}

WorkPtr MpiBackend::reduce(const Tensor& tensor, int root, ReduceOp op) {
  const Check check(rank_, size_, "reduce");
  check.host(tensor, "tensor");
  check.group_rank(root, "root");
  const MpiReduction how = reduction(tensor.dtype(), op);
  auto work = std::make_shared<MpiWork>(rank_);
  work->keep(tensor);
  const bool is_root = rank_ == root;
  for_each_chunk(tensor.numel(), options_.max_count, [&](std::int64_t offset, int count) {
    std::byte* chunk = element_at(tensor, offset);
    TT_MPI_CHECK(MPI_Ireduce(is_root ? MPI_IN_PLACE : chunk, is_root ? chunk : nullptr, count, how.datatype, how.op,
                             root, comm_, work->request_slot()));
  });
  if (how.average && is_root) work->on_finish([tensor, size = size_] { divide_in_place(tensor, size); });
  return work;
}

WorkPtr MpiBackend::all_gather(const Tensor& output, const Tensor& input) {
  const Check check(rank_, size_, "all_gather");
  check.host(output, "output");
  check.host(input, "input");
  check.same_dtype(output, input.dtype(), "output");
  check.elements(output, input.numel() * size_, "output");
  auto work = std::make_shared<MpiWork>(rank_);
  work->keep(output);
  work->keep(input);
  const Block block = block_of(input.numel(), input.dtype(), options_.max_count, *work);
  // An input that already sits in this rank's block of the output is passed in place.
  const bool in_place = input.data_ptr() == element_at(output, rank_ * input.numel());
  TT_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : input.data_ptr(), block.count, block.datatype,
                              output.data_ptr(), block.count, block.datatype, comm_, work->request_slot()));
  return work;
}

WorkPtr MpiBackend::gather(const Tensor& output, const Tensor& input, int root) {
  const Check check(rank_, size_, "gather");
  check.host(input, "input");
  check.group_rank(root, "root");
  const bool is_root = rank_ == root;
  if (is_root) {
    check.host(output, "output");
    check.same_dtype(output, input.dtype(), "output");
    check.elements(output, input.numel() * size_, "output");
  }
  auto work = std::make_shared<MpiWork>(rank_);
  work->keep(input);
  if (is_root) work->keep(output);
  const Block block = block_of(input.numel(), input.dtype(), options_.max_count, *work);
  const bool in_place = is_root && input.data_ptr() == element_at(output, rank_ * input.numel());
  TT_MPI_CHECK(MPI_Igather(in_place ? MPI_IN_PLACE : input.data_ptr(), block.count, block.datatype,
                           is_root ? output.data_ptr() : nullptr, block.count, block.datatype, root, comm_,
                           work->request_slot()));
  return work;
}

WorkPtr MpiBackend::scatter(const Tensor& output, const Tensor& input, int root) {
  const Check check(rank_, size_, "scatter");
  check.host(output, "output");
  check.group_rank(root, "root");
  const bool is_root = rank_ == root;
  if (is_root) {
    check.host(input, "input");
    check.same_dtype(input, output.dtype(), "input");
    check.elements(input, output.numel() * size_, "input");
  }
  auto work = std::make_shared<MpiWork>(rank_);
  work->keep(output);
  if (is_root) work->keep(input);
  const Block block = block_of(output.numel(), output.dtype(), options_.max_count, *work);
  // The root's own block may already be where its output is.
  const bool in_place = is_root && output.data_ptr() == element_at(input, rank_ * output.numel());
  TT_MPI_CHECK(MPI_Iscatter(is_root ? input.data_ptr() : nullptr, block.count, block.datatype,
                            in_place ? MPI_IN_PLACE : output.data_ptr(), block.count, block.datatype, root, comm_,
                            work->request_slot()));
  return work;
}

WorkPtr MpiBackend::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  const Check check(rank_, size_, "reduce_scatter");
  check.host(output, "output");
  check.host(input, "input");
  check.same_dtype(input, output.dtype(), "input");
  const std::int64_t block = output.numel();
  check.elements(input, block * size_, "input");
  const MpiReduction how = reduction(output.dtype(), op);
  auto work = std::make_shared<MpiWork>(rank_);
  work->keep(output);
  work->keep(input);
  if (block <= options_.max_count) {
    TT_MPI_CHECK(MPI_Ireduce_scatter_block(input.data_ptr(), output.data_ptr(), static_cast<int>(block),
                                           how.datatype, how.op, comm_, work->request_slot()));
  } else {
    // Reductions cannot use derived datatypes: reduce each rank's block to it, chunk by chunk.
    for (int root = 0; root < size_; ++root) {
      for_each_chunk(block, options_.max_count, [&](std::int64_t offset, int count) {
        TT_MPI_CHECK(MPI_Ireduce(element_at(input, root * block + offset),
                                 root == rank_ ? element_at(output, offset) : nullptr, count, how.datatype, how.op,
                                 root, comm_, work->request_slot()));
      });
    }
  }
  if (how.average) work->on_finish([output, size = size_] { divide_in_place(output, size); });
  return work;
}

WorkPtr MpiBackend::all_to_all(const Tensor& output, const Tensor& input, std::span<const std::int64_t> output_counts,
                               std::span<const std::int64_t> input_counts) {
  const Check check(rank_, size_, "all_to_all");
  check.host(output, "output");
  check.host(input, "input");
  check.same_dtype(input, output.dtype(), "input");
  check.counts(output_counts, output, "output_counts");
  check.counts(input_counts, input, "input_counts");
  auto work = std::make_shared<MpiWork>(rank_);
  work->keep(output);
  work->keep(input);
  const MPI_Datatype element = element_datatype(output.dtype());
  if (std::max(output.numel(), input.numel()) <= options_.max_count) {
    const int* send_counts = work->keep(as_ints(input_counts));
    const int* send_displacements = work->keep(as_ints(displacements_of(input_counts)));
    const int* receive_counts = work->keep(as_ints(output_counts));
    const int* receive_displacements = work->keep(as_ints(displacements_of(output_counts)));
    TT_MPI_CHECK(MPI_Ialltoallv(input.data_ptr(), send_counts, send_displacements, element, output.data_ptr(),
                                receive_counts, receive_displacements, element, comm_, work->request_slot()));
    return work;
  }
  // Beyond int counts and displacements: one datatype per block, placed at its byte offset.
  const PlacedBlocks sent = placed_blocks(input_counts, element, options_.max_count, *work);
  const PlacedBlocks received = placed_blocks(output_counts, element, options_.max_count, *work);
  const int* zeros = work->keep(std::vector<int>(static_cast<std::size_t>(size_), 0));
  TT_MPI_CHECK(MPI_Ialltoallw(input.data_ptr(), sent.counts, zeros, sent.datatypes, output.data_ptr(),
                              received.counts, zeros, received.datatypes, comm_, work->request_slot()));
  return work;
}

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
ReceivedMessage MpiBackend::recv_message(int src, int tag) {
  const Check check(rank_, size_, "recv_message");
  if (src != kAnySource) check.group_rank(src, "peer");
  check.tag(tag, tag_upper_bound_);
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  TT_MPI_CHECK(MPI_Mprobe(src == kAnySource ? MPI_ANY_SOURCE : src, tag, comm_, &message, &status));
  MPI_Count length = 0;
  TT_MPI_CHECK(MPI_Get_elements_x(&status, MPI_BYTE, &length));
  ReceivedMessage received{Tensor::empty({static_cast<std::int64_t>(length)}, {DType::UInt8}), status.MPI_SOURCE};
  MpiWork work(rank_);
  const Block block = block_of(length, DType::UInt8, options_.max_count, work);
  TT_MPI_CHECK(MPI_Mrecv(received.bytes.data_ptr(), block.count, block.datatype, &message, MPI_STATUS_IGNORE));
  return received;
}

WorkPtr MpiBackend::batch_p2p(std::span<const P2POp> ops) { return point_to_point(ops, "batch_p2p"); }

WorkPtr MpiBackend::point_to_point(std::span<const P2POp> ops, std::string_view operation) {
  const Check check(rank_, size_, operation);
  for (const P2POp& op : ops) {
    check.host(op.tensor, op.kind == P2POp::Kind::Send ? "sent tensor" : "received tensor");
    if (op.kind == P2POp::Kind::Send || op.peer != kAnySource) check.group_rank(op.peer, "peer");
    check.tag(op.tag, tag_upper_bound_);
  }
  auto work = std::make_shared<MpiWork>(rank_);
  for (const P2POp& op : ops) post_p2p(op, comm_, options_.max_count, *work);
  return work;
}

WorkPtr MpiBackend::barrier() {
  auto work = std::make_shared<MpiWork>(rank_);
  TT_MPI_CHECK(MPI_Ibarrier(comm_, work->request_slot()));
  return work;
}

}  // namespace tensortree::detail

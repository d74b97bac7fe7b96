// The NCCL backend at world size 1, on cuda:0 (no MPI: the unique id needs no broadcast). Every
// operation with every dtype and reduce op, values checked element by element on the CPU; the
// combinations NCCL cannot reduce; ordering behind the legacy default stream; Works completed in
// any order, dropped in flight, or outliving their backend. Several ranks: tests/dist.
#include <catch2/catch.hpp>

#include "tensortree/config.hpp"

// The backend is built with NCCL and MPI (src/meson.build); elsewhere this file has no test cases.
#if TT_HAVE_NCCL && TT_HAVE_MPI

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "comm/engine.hpp"
#include "transport/nccl/nccl_backend.hpp"
#include "transport/nccl/nccl_check.hpp"  // TT_NCCL_HAS_*: which dtypes this NCCL reduces
#include "tensortree/cuda_stream.hpp"
#include "tensortree/device.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/error.hpp"
#include "tensortree/reduce_op.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/work.hpp"

using namespace tensortree;

namespace {

const Device kGpu = Device::cuda(0);
constexpr std::chrono::milliseconds kTestTimeout = std::chrono::minutes(1);
const Shape kSmall{3, 5};  // small enough for every float8 value to stay finite

constexpr std::array kAllOps = {ReduceOp::Sum,       ReduceOp::Product,   ReduceOp::Min,
                                ReduceOp::Max,       ReduceOp::Avg,       ReduceOp::BitwiseAnd,
                                ReduceOp::BitwiseOr, ReduceOp::BitwiseXor};

std::unique_ptr<detail::Engine> world_of_one() {
  return detail::make_nccl_backend(0, 1, 0, kTestTimeout, [](std::span<std::byte>) {});
}

// Non-zero values that differ from element to element: bools follow a pattern with both values,
// complex numbers get an imaginary part.
Tensor host_values(DType dtype, const Shape& shape, double start = 1.0) {
  const Tensor values = Tensor::arange(shape, start, 1.0, {.dtype = dtype});
  if (dtype == DType::Bool) {
    for (std::int64_t i = 0; i < values.numel(); ++i) values.data<bool>()[i] = i % 3 != 1;
  } else if (dtype == DType::Complex64) {
    auto* z = values.data<std::complex<float>>();
    for (std::int64_t i = 0; i < values.numel(); ++i) z[i].imag(-0.5f * z[i].real());
  } else if (dtype == DType::Complex128) {
    auto* z = values.data<std::complex<double>>();
    for (std::int64_t i = 0; i < values.numel(); ++i) z[i].imag(-0.5 * z[i].real());
  }
  return values;
}

Tensor gpu_zeros(DType dtype, const Shape& shape) {
  return Tensor::zeros(shape, {.dtype = dtype, .device = kGpu});
}

// Copies `gpu` to the CPU and compares every element with `expected`; names the first that differs.
void require_values(const Tensor& gpu, const Tensor& expected) {
  const Tensor got = gpu.to(Device::cpu());
  REQUIRE(got.dtype() == expected.dtype());
  REQUIRE(got.shape() == expected.shape());
  std::int64_t first_wrong = -1;
  for (std::int64_t i = 0; i < got.numel() && first_wrong < 0; ++i) {
    if (got.value_at_linear(i) != expected.value_at_linear(i)) first_wrong = i;
  }
  if (first_wrong >= 0) {
    INFO("element " << first_wrong << ": got " << got.value_at_linear(first_wrong) << ", expected "
                    << expected.value_at_linear(first_wrong));
    FAIL("values differ");
  }
}

// What this backend promises to reduce (see nccl_backend.hpp).
bool nccl_reduces(DType dtype, ReduceOp op) {
  if (op == ReduceOp::BitwiseAnd || op == ReduceOp::BitwiseOr || op == ReduceOp::BitwiseXor) return false;
  switch (dtype) {
    case DType::Bool: return op != ReduceOp::Avg;
    case DType::Complex64:
    case DType::Complex128: return op == ReduceOp::Sum || op == ReduceOp::Avg;
    case DType::Int16:
    case DType::UInt16: return false;
    case DType::BFloat16: return TT_NCCL_HAS_BFLOAT16;
    case DType::Float8_e4m3fn:
    case DType::Float8_e5m2: return TT_NCCL_HAS_FLOAT8 && op != ReduceOp::Avg;
    default: return true;
  }
}

template <class Call>
void require_not_supported(Call&& call, DType dtype, ReduceOp op) {
  try {
    call();
    FAIL("expected NotSupported");
  } catch (const NotSupported& error) {
    const std::string what = error.what();
    CHECK_THAT(what, Catch::Contains(" " + std::string(dtype_name(dtype)) + " tensors") &&
                         Catch::Contains(std::string(reduce_op_name(op))));
  }
}

using ReductionCall = std::function<WorkPtr(detail::Engine&, const Tensor& output, const Tensor& input, ReduceOp)>;

// At world size 1 a reduction leaves the values as they were: exactly, for every supported pair
// (AVG divides by 1). `in_place` operations get the input as their output.
void check_every_dtype_and_op(const ReductionCall& call, bool in_place) {
  const auto nccl = world_of_one();
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllOps) {
      INFO(dtype << " " << op);
      const Tensor expected = host_values(dtype, kSmall);
      const Tensor input = expected.to(kGpu);
      const Tensor output = in_place ? input : gpu_zeros(dtype, kSmall);
      if (nccl_reduces(dtype, op)) {
        call(*nccl, output, input, op)->wait();
        require_values(output, expected);
      } else {
        require_not_supported([&] { call(*nccl, output, input, op); }, dtype, op);
        require_values(input, expected);
      }
    }
  }
}

}  // namespace

// ---- creation -----------------------------------------------------------------------------------

TEST_CASE("make_nccl_backend at world size 1 is rank 0 of 1 and named nccl") {
  const auto nccl = world_of_one();
  CHECK(nccl->name() == "nccl");
  CHECK(nccl->rank() == 0);
  CHECK(nccl->size() == 1);
}

TEST_CASE("make_nccl_backend hands rank 0's unique id, all of its bytes, to the broadcast callback") {
  std::size_t id_bytes = 0;
  bool any_non_zero = false;
  const auto nccl = detail::make_nccl_backend(0, 1, 0, kTestTimeout, [&](std::span<std::byte> id) {
    id_bytes = id.size();
    for (std::byte b : id) any_non_zero = any_non_zero || b != std::byte{0};
  });
  CHECK(id_bytes == NCCL_UNIQUE_ID_BYTES);
  CHECK(any_non_zero);
}

TEST_CASE("make_nccl_backend rejects a rank outside the group and a device that does not exist") {
  const auto no_broadcast = [](std::span<std::byte>) {};
  CHECK_THROWS_AS(detail::make_nccl_backend(1, 1, 0, kTestTimeout, no_broadcast), InvalidArgument);
  CHECK_THROWS_AS(detail::make_nccl_backend(-1, 1, 0, kTestTimeout, no_broadcast), InvalidArgument);
  CHECK_THROWS_AS(detail::make_nccl_backend(0, 0, 0, kTestTimeout, no_broadcast), InvalidArgument);
  CHECK_THROWS_AS(detail::make_nccl_backend(0, 1, -1, kTestTimeout, no_broadcast), InvalidArgument);
  CHECK_THROWS_AS(detail::make_nccl_backend(0, 1, cuda_device_count(), kTestTimeout, no_broadcast), InvalidArgument);
}

// ---- data movement: every dtype as bytes ---------------------------------------------------------

TEST_CASE("broadcast from root 0 keeps the values of every dtype") {
  const auto nccl = world_of_one();
  for (DType dtype : kAllDTypes) {
    INFO(dtype);
    const Tensor expected = host_values(dtype, kSmall);
    const Tensor tensor = expected.to(kGpu);
    nccl->broadcast(tensor, 0)->wait();
    require_values(tensor, expected);
  }
}

TEST_CASE("all_gather at world size 1 writes the input into the output, for every dtype") {
  const auto nccl = world_of_one();
  for (DType dtype : kAllDTypes) {
    INFO(dtype);
    const Tensor expected = host_values(dtype, kSmall);
    const Tensor output = gpu_zeros(dtype, kSmall);
    nccl->all_gather(output, expected.to(kGpu))->wait();
    require_values(output, expected);
  }
}

TEST_CASE("gather to root 0 and scatter from root 0 move the one block, for every dtype") {
  const auto nccl = world_of_one();
  for (DType dtype : kAllDTypes) {
    INFO(dtype);
    const Tensor expected = host_values(dtype, kSmall, 7.0);
    const Tensor gathered = gpu_zeros(dtype, kSmall);
    nccl->gather(gathered, expected.to(kGpu), 0)->wait();
    require_values(gathered, expected);
    const Tensor scattered = gpu_zeros(dtype, kSmall);
    nccl->scatter(scattered, expected.to(kGpu), 0)->wait();
    require_values(scattered, expected);
  }
}

TEST_CASE("all_to_all moves the one block; empty blocks move nothing and complete") {
  const auto nccl = world_of_one();
  for (DType dtype : {DType::Float32, DType::Int16, DType::Bool, DType::Complex128, DType::Float8_e5m2}) {
    INFO(dtype);
    const Tensor expected = host_values(dtype, {12});
    const Tensor output = gpu_zeros(dtype, {12});
    const std::array<std::int64_t, 1> counts{12};
    nccl->all_to_all(output, expected.to(kGpu), counts, counts)->wait();
    require_values(output, expected);
  }
  const std::array<std::int64_t, 1> none{0};
  nccl->all_to_all(gpu_zeros(DType::Float32, {0}), gpu_zeros(DType::Float32, {0}), none, none)->wait();
}

TEST_CASE("all_to_all rejects count lists whose length is not the group size") {
  const auto nccl = world_of_one();
  const std::array<std::int64_t, 2> two{2, 2};
  const std::array<std::int64_t, 1> one{4};
  const Tensor tensor = gpu_zeros(DType::Float32, {4});
  CHECK_THROWS_AS(nccl->all_to_all(tensor, tensor, two, one), InvalidArgument);
}

TEST_CASE("batch_p2p to self: each receive gets the send posted in the same position, in order") {
  const auto nccl = world_of_one();
  const Tensor first = host_values(DType::Int64, {4, 3}, 11.0);
  const Tensor second = host_values(DType::BFloat16, {17}, 3.0);
  const Tensor first_in = gpu_zeros(DType::Int64, {4, 3});
  const Tensor second_in = gpu_zeros(DType::BFloat16, {17});
  const std::vector<P2POp> ops = {
      {P2POp::Kind::Send, first.to(kGpu), 0},
      {P2POp::Kind::Recv, first_in, 0},
      {P2POp::Kind::Send, second.to(kGpu), 0},
      {P2POp::Kind::Recv, second_in, 0},
  };
  nccl->batch_p2p(ops)->wait();
  require_values(first_in, first);
  require_values(second_in, second);
}

TEST_CASE("barrier completes at world size 1") {
  const auto nccl = world_of_one();
  const WorkPtr work = nccl->barrier();
  work->wait();
  CHECK(work->is_completed());
}

// ---- reductions: the support matrix --------------------------------------------------------------

TEST_CASE("all_reduce, every dtype and op: exact where NCCL reduces, NotSupported naming both elsewhere") {
  const auto all_reduce = [](detail::Engine& nccl, const Tensor& tensor, const Tensor&, ReduceOp op) {
    return nccl.all_reduce(tensor, op);
  };
  check_every_dtype_and_op(all_reduce, true);
}

TEST_CASE("reduce to root 0, every dtype and op: exact where NCCL reduces, NotSupported elsewhere") {
  const auto reduce = [](detail::Engine& nccl, const Tensor& tensor, const Tensor&, ReduceOp op) {
    return nccl.reduce(tensor, 0, op);
  };
  check_every_dtype_and_op(reduce, true);
}

TEST_CASE("reduce_scatter with every dtype and op writes the reduced block, NotSupported elsewhere") {
  const auto reduce_scatter = [](detail::Engine& nccl, const Tensor& output, const Tensor& input, ReduceOp op) {
    return nccl.reduce_scatter(output, input, op);
  };
  check_every_dtype_and_op(reduce_scatter, false);
}

TEST_CASE("AVG of integers at world size 1 keeps negative and odd values (no rounding, no sign loss)") {
  const auto nccl = world_of_one();
  for (DType dtype : {DType::Int8, DType::Int32, DType::Int64, DType::UInt8}) {
    INFO(dtype);
    const double start = dtype == DType::UInt8 ? 1.0 : -7.0;
    const Tensor expected = host_values(dtype, {15}, start);
    const Tensor tensor = expected.to(kGpu);
    nccl->all_reduce(tensor, ReduceOp::Avg)->wait();
    require_values(tensor, expected);
  }
}

// ---- what NCCL cannot do -------------------------------------------------------------------------

TEST_CASE("a receive from kAnySource is NotSupported, alone or in a batch, and nothing is posted") {
  const auto nccl = world_of_one();
  const Tensor tensor = gpu_zeros(DType::Float32, {4});
  CHECK_THROWS_AS(nccl->recv(tensor, kAnySource, 0), NotSupported);
  const Tensor payload = host_values(DType::Float32, {4});
  const std::vector<P2POp> ops = {{P2POp::Kind::Send, payload.to(kGpu), 0},
                                  {P2POp::Kind::Recv, tensor, kAnySource}};
  CHECK_THROWS_AS(nccl->batch_p2p(ops), NotSupported);
  // Had the send been posted, this broadcast would queue behind a send nobody receives.
  const Tensor after = payload.to(kGpu);
  nccl->broadcast(after, 0)->wait(std::chrono::seconds(60));
  require_values(after, payload);
}

TEST_CASE("tensors on the CPU or undefined are InvalidArgument naming the argument") {
  const auto nccl = world_of_one();
  const Tensor on_cpu = host_values(DType::Float32, {4});
  const Tensor on_gpu = on_cpu.to(kGpu);
  CHECK_THROWS_WITH(nccl->all_reduce(on_cpu, ReduceOp::Sum),
                    Catch::Contains("tensor must be") && Catch::Contains("cpu"));
  CHECK_THROWS_WITH(nccl->all_gather(on_cpu, on_gpu), Catch::Contains("output"));
  CHECK_THROWS_WITH(nccl->all_gather(on_gpu, on_cpu), Catch::Contains("input"));
  CHECK_THROWS_AS(nccl->send(Tensor(), 0, 0), InvalidArgument);
}

// ---- ordering and completion ---------------------------------------------------------------------

TEST_CASE("an operation reads what a copy queued just before it on the legacy default stream wrote") {
  const auto nccl = world_of_one();
  constexpr std::int64_t kElements = std::int64_t{1} << 26;  // 256 MiB: the copy outlasts NCCL's launch
  const Tensor source = Tensor::arange({kElements}, 1.0, 1.0, {.dtype = DType::Int32, .device = kGpu});
  const Tensor input = gpu_zeros(DType::Int32, {kElements});
  const Tensor output = gpu_zeros(DType::Int32, {kElements});
  input.copy_(source);  // device to device: queued on the legacy stream, the host does not wait
  nccl->all_gather(output, input)->wait();
  require_values(output, source.to(Device::cpu()));
}

// A non-blocking stream of the test's, destroyed at the end of the case.
struct TestStream {
  cudaStream_t handle = nullptr;
  TestStream() { REQUIRE(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking) == cudaSuccess); }
  ~TestStream() { cudaStreamDestroy(handle); }
};

TEST_CASE("an operation waits for the caller's stream, and make_stream_wait orders another stream after it") {
  const auto nccl = world_of_one();
  const TestStream writer;
  const TestStream reader;
  constexpr std::int64_t kElements = std::int64_t{1} << 20;
  const Tensor input = gpu_zeros(DType::Int32, {kElements});
  const Tensor output = gpu_zeros(DType::Int32, {kElements});
  // The writer stream is held back on the host for 200 ms before it sets every byte of the input
  // to 1: an operation ordered only after the legacy default stream would gather zeros.
  const auto hold_back = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
  REQUIRE(cudaLaunchHostFunc(writer.handle, hold_back, nullptr) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(input.data_ptr(), 1, input.nbytes(), writer.handle) == cudaSuccess);
  WorkPtr work;
  {
    const CudaStreamGuard ordering(writer.handle);
    work = nccl->all_gather(output, input);
  }
  work->make_stream_wait(reader.handle);
  std::vector<std::int32_t> gathered(static_cast<std::size_t>(kElements));
  REQUIRE(cudaMemcpyAsync(gathered.data(), output.data_ptr(), output.nbytes(), cudaMemcpyDeviceToHost,
                          reader.handle) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(reader.handle) == cudaSuccess);
  const auto wrong = std::count_if(gathered.begin(), gathered.end(), [](std::int32_t v) { return v != 0x01010101; });
  CHECK(wrong == 0);
  work->wait();
}

TEST_CASE("several operations in flight complete whatever order they are waited in") {
  const auto nccl = world_of_one();
  constexpr std::int64_t kElements = std::int64_t{1} << 22;
  std::vector<Tensor> expected;
  std::vector<Tensor> outputs;
  std::vector<WorkPtr> works;
  for (int i = 0; i < 4; ++i) {
    expected.push_back(host_values(DType::Float32, {kElements}, 1.0 + 1000.0 * i));
    outputs.push_back(gpu_zeros(DType::Float32, {kElements}));
    works.push_back(nccl->all_gather(outputs.back(), expected.back().to(kGpu)));
  }
  const Tensor reduced = expected[0].to(kGpu);
  works.push_back(nccl->all_reduce(reduced, ReduceOp::Max));

  while (!works[2]->is_completed()) {
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait(std::chrono::seconds(60));
  for (const WorkPtr& work : works) CHECK(work->is_completed());
  for (std::size_t i = 0; i < outputs.size(); ++i) require_values(outputs[i], expected[i]);
  require_values(reduced, expected[0]);
}

TEST_CASE("a Work dropped while in flight waits for its operation before letting go of the buffers") {
  const auto nccl = world_of_one();
  constexpr std::int64_t kElements = std::int64_t{1} << 26;
  const Tensor expected = host_values(DType::Int32, {kElements});
  const Tensor output = gpu_zeros(DType::Int32, {kElements});
  nccl->all_gather(output, expected.to(kGpu));  // the Work and the only handle on the input die here
  require_values(output, expected);
}

TEST_CASE("a Work outlives the backend that returned it and still completes") {
  auto nccl = world_of_one();
  const Tensor expected = host_values(DType::Float64, {1 << 20});
  const Tensor output = gpu_zeros(DType::Float64, {1 << 20});
  const WorkPtr work = nccl->all_gather(output, expected.to(kGpu));
  nccl.reset();
  work->wait();
  require_values(output, expected);
}

TEST_CASE("an aborted NCCL backend refuses every later operation, naming the reason") {
  const auto nccl = world_of_one();
  Tensor values = host_values(DType::Float32, kSmall).to(kGpu);
  nccl->all_reduce(values, ReduceOp::Sum)->wait();
  nccl->abort("peer 3 is gone");
  try {
    nccl->all_reduce(values, ReduceOp::Sum)->wait();
    FAIL("an aborted communicator ran an operation");
  } catch (const BackendError& error) {
    CHECK_THAT(error.what(), Catch::Matchers::Contains("peer 3 is gone"));
  }
}

#endif  // TT_HAVE_NCCL && TT_HAVE_MPI

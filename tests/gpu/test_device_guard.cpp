// DeviceGuard (src/cuda): it makes a device current for a scope and puts back only a previous device
// that has a context, so a fresh thread working on cuda:N creates no context on GPU 0.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "cuda/cuda_device_guard.hpp"
#include "tensortree/device.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;

TEST_CASE("a device in use has a primary context, and a guard on it leaves the thread there") {
  const Tensor on_gpu = Tensor::zeros({4}, {DType::Float32, Device::cuda(0)});
  CHECK(cuda::primary_context_active(0));
  std::thread([] {
    { const cuda::DeviceGuard guard(0); }
    int current = -1;
    CHECK(cudaGetDevice(&current) == cudaSuccess);
    CHECK(current == 0);
  }).join();
}

TEST_CASE("a device that cannot be made current is an error, or the current device on a path that must not throw") {
  CHECK_THROWS_AS(cuda::DeviceGuard(cuda_device_count() + 7), BackendError);
  int before = -1;
  REQUIRE(cudaGetDevice(&before) == cudaSuccess);
  {
    const cuda::DeviceGuard guard(cuda_device_count() + 7, std::nothrow);
    int current = -1;
    CHECK(cudaGetDevice(&current) == cudaSuccess);
    CHECK(current == before);
  }
  (void)cudaGetLastError();  // the failed cudaSetDevice leaves its error behind
}

// With two GPUs: a fresh process whose fresh thread allocates on cuda:1 leaves GPU 0 without a
// context (this program run again, so that no earlier test has touched GPU 0).
TEST_CASE("a fresh thread working on cuda:1 creates no context on GPU 0") {
  if (cuda_device_count() < 2) {
    WARN("one GPU: nothing to check (the previous device and the guarded one are the same)");
    return;
  }
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execl("/proc/self/exe", "gpu_device_guard", "[.fresh_process]", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("child of the two-GPU case", "[.fresh_process]") {
  REQUIRE_FALSE(cuda::primary_context_active(0));
  std::thread([] { (void)Tensor::zeros({1024}, {DType::Float32, Device::cuda(1)}).to(Device::cpu()); }).join();
  CHECK(cuda::primary_context_active(1));
  CHECK_FALSE(cuda::primary_context_active(0));
}

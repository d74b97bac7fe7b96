// CUDA parameters on one node: the publisher's slots are device memory, and a subscriber in another
// process maps them through CUDA IPC and reads each version. The subscriber is this program run
// again (fork, then exec): the GPU main has initialised CUDA before any test starts, and a forked
// child cannot use an inherited CUDA context.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "tensortree/error.hpp"
#include "tensortree/weights.hpp"
#include "weights_test_support.hpp"

using namespace tensortree;
using namespace tensortree::weights_test;

namespace {

constexpr std::uint64_t kVersions = 20;
// The environment variable that hands the publisher's name to the subscriber process.
constexpr const char* kNameVariable = "TENSORTREE_TEST_WEIGHTS_NAME";

// The child's exit status: 0 when it saw the last version whole, views on the device included.
int subscribe_on_device(const std::string& name) {
  try {
    WeightSubscriber subscriber(name, {.timeout = std::chrono::seconds(30)});
    std::uint64_t last = 0;
    while (last < kVersions) {
      const WeightLease lease = subscriber.latest();
      if (!lease.tree().get("encoder.w").device().is_cuda()) return 2;
      if (lease.version() < last) return 3;
      if (!params_mismatch(lease.tree().to(Device::cpu()), lease.version()).empty()) return 4;
      last = lease.version();
    }
    const auto [version, copy] = subscriber.latest_copy();
    return version == kVersions && params_mismatch(copy.to(Device::cpu()), kVersions).empty() ? 0 : 5;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "subscriber: %s\n", e.what());
    return 6;
  }
}

}  // namespace

TEST_CASE("CUDA slots published by one process are read through CUDA IPC by another") {
  const std::string name = unique_name("cuda");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::setenv(kNameVariable, name.c_str(), 1);
    ::execl("/proc/self/exe", "gpu_weights_cuda", "[.subscriber]", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  {
    WeightPublisher publisher(name, {.device = Device::cuda(0)});
    for (std::uint64_t v = 1; v <= kVersions; ++v) publisher.publish(make_params(v));
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
  }
}

// Run only by the test above, in its child process.
TEST_CASE("subscriber process of the CUDA weights test", "[.subscriber]") {
  const char* name = std::getenv(kNameVariable);
  REQUIRE(name != nullptr);
  REQUIRE(subscribe_on_device(name) == 0);
}

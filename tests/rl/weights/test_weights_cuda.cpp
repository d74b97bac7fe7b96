// CUDA parameters on one node: the publisher's slots are device memory, and a subscriber in another
// process (forked before either touches CUDA) maps them through CUDA IPC and reads each version.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include "tensortree/error.hpp"
#include "tensortree/weights.hpp"
#include "weights_test_support.hpp"

using namespace tensortree;
using namespace tensortree::weights_test;

namespace {

constexpr std::uint64_t kVersions = 20;

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
  } catch (const std::exception&) {
    return 6;
  }
}

}  // namespace

TEST_CASE("CUDA slots published by one process are read through CUDA IPC by another") {
  const std::string name = unique_name("cuda");
  // Fork first: a child must not inherit a CUDA context.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(subscribe_on_device(name));
  {
    WeightPublisher publisher(name, {.device = Device::cuda(0)});
    for (std::uint64_t v = 1; v <= kVersions; ++v) publisher.publish(make_params(v));
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
  }
}

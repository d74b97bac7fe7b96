// GroupOptions layered over the environment: a field the caller sets wins, a field left unset
// takes its TENSORTREE_* variable's value, else the default; a bad value is InvalidArgument
// naming the variable and the value when the options are resolved, and a group made with them
// runs with the resolved values.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "in_process_support.hpp"
#include "scoped_env.hpp"
#include "tensortree/error.hpp"
#include "tensortree/group.hpp"

using namespace tensortree;
using namespace tensortree::test;
using namespace std::chrono_literals;

TEST_CASE("group options: unset fields and no variables give the defaults") {
  const ResolvedGroupOptions resolved = GroupOptions{}.resolve();
  const ResolvedGroupOptions defaults;
  CHECK(resolved.timeout == defaults.timeout);
  CHECK(resolved.timeout == 10min);
  CHECK(resolved.max_message_bytes == defaults.max_message_bytes);
  CHECK_FALSE(resolved.debug_checks);
  CHECK(resolved.host_transport == HostTransport::Auto);
  CHECK(resolved.cuda_transport == CudaTransport::Auto);
}

TEST_CASE("group options: setting only the timeout keeps every variable's value for the other fields") {
  const ScopedEnv bytes("TENSORTREE_MAX_MESSAGE_BYTES", "4096");
  const ScopedEnv debug("TENSORTREE_DISTRIBUTED_DEBUG", "DETAIL");
  const ScopedEnv host("TENSORTREE_HOST_TRANSPORT", "mpi");
  const ScopedEnv cuda("TENSORTREE_CUDA_TRANSPORT", "staged");
  const ResolvedGroupOptions resolved = GroupOptions{.timeout = 30s}.resolve();
  CHECK(resolved.timeout == 30s);
  CHECK(resolved.max_message_bytes == 4096);
  CHECK(resolved.debug_checks);
  CHECK(resolved.host_transport == HostTransport::Mpi);
  CHECK(resolved.cuda_transport == CudaTransport::Staged);
  // And a group made with them runs with those values.
  run_ranks(2, [](const Group& group) {
    expect(group.options().timeout == 30s && group.options().max_message_bytes == 4096 &&
               group.options().debug_checks && group.options().host_transport == HostTransport::Mpi,
           "the group's options are the resolved ones");
  }, GroupOptions{.timeout = 30s});
}

TEST_CASE("group options: an explicit field wins over its variable, which is then not read") {
  const ScopedEnv timeout("TENSORTREE_TIMEOUT_MS", "2500");
  const ScopedEnv bytes("TENSORTREE_MAX_MESSAGE_BYTES", "lots");
  const ScopedEnv debug("TENSORTREE_DISTRIBUTED_DEBUG", "DETAIL");
  const ScopedEnv host("TENSORTREE_HOST_TRANSPORT", "mpi");
  CHECK(GroupOptions{.max_message_bytes = 64}.resolve().timeout == 2500ms);
  const ResolvedGroupOptions resolved = GroupOptions{.timeout = 7s,
                                                     .max_message_bytes = 64,
                                                     .debug_checks = false,
                                                     .host_transport = HostTransport::Auto}
                                            .resolve();
  CHECK(resolved.timeout == 7s);
  CHECK(resolved.max_message_bytes == 64);
  CHECK_FALSE(resolved.debug_checks);
  CHECK(resolved.host_transport == HostTransport::Auto);
}

TEST_CASE("group options: a bad variable is InvalidArgument naming the variable and its value") {
  const auto [name, value] = GENERATE(table<const char*, const char*>({
      {"TENSORTREE_TIMEOUT_MS", "soon"},
      {"TENSORTREE_TIMEOUT_MS", "0"},
      {"TENSORTREE_TIMEOUT_MS", "-5"},
      {"TENSORTREE_MAX_MESSAGE_BYTES", "12k"},
      {"TENSORTREE_DISTRIBUTED_DEBUG", "DETIAL"},
      {"TENSORTREE_HOST_TRANSPORT", "tcp"},
      {"TENSORTREE_CUDA_TRANSPORT", "gloo"},
  }));
  INFO(name << "=" << value);
  const ScopedEnv bad(name, value);
  CHECK_THROWS_AS(GroupOptions{}.resolve(), InvalidArgument);
  CHECK_THROWS_WITH(GroupOptions{}.resolve(), Catch::Contains(name) && Catch::Contains(value));
  // An in-process world made with them fails as a DistributedContext does: a typed error, not terminate.
  CHECK_THROWS_AS(run_ranks(2, [](const Group&) {}, GroupOptions{}), InvalidArgument);
}

TEST_CASE("group options: a timeout that is not positive is InvalidArgument") {
  CHECK_THROWS_WITH(GroupOptions{.timeout = 0ms}.resolve(), Catch::Contains("GroupOptions::timeout"));
  CHECK_THROWS_AS(GroupOptions{.timeout = -5ms}.resolve(), InvalidArgument);
}

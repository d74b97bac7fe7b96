// Weight publication between processes the test forks: readers that loop while the publisher
// writes never see a torn or an older version, and a reader SIGKILLed while it holds versions does
// not stop the publisher.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "tensortree/error.hpp"
#include "tensortree/weights.hpp"
#include "weights_test_support.hpp"

using namespace tensortree;
using namespace tensortree::weights_test;

namespace {

constexpr std::uint64_t kVersions = 400;

// What a reader child reports through its pipe.
struct ReaderReport {
  std::uint64_t leases = 0;
  std::uint64_t distinct_versions = 0;
  std::uint64_t copies = 0;
  char failure[200] = {};
};

void write_all(int fd, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n <= 0) ::_exit(9);
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

bool read_all(int fd, void* data, std::size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads until it sees the last version, checking every element of each lease (while holding it,
// so the publisher must write around it) and, every third time, of a copy.
ReaderReport read_until_last(const std::string& name) {
  ReaderReport report;
  const auto fail = [&](const std::string& why) {
    std::snprintf(report.failure, sizeof report.failure, "%s", why.c_str());
    return report;
  };
  WeightSubscriber subscriber(name);
  const TensorTree copy = make_params(0);
  std::uint64_t last = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (last < kVersions) {
    if (std::chrono::steady_clock::now() > deadline) return fail("the last version never came");
    const WeightLease lease = subscriber.latest();
    if (lease.version() < last) return fail("version " + std::to_string(lease.version()) + " after " + std::to_string(last));
    const std::string mismatch = params_mismatch(lease.tree(), lease.version());
    if (!mismatch.empty()) return fail("torn version " + std::to_string(lease.version()) + ": " + mismatch);
    report.distinct_versions += lease.version() != last ? 1 : 0;
    last = lease.version();
    ++report.leases;
    if (report.leases % 3 == 0) {
      const std::uint64_t copied = subscriber.copy_into(copy);
      const std::string copy_mismatch = params_mismatch(copy, copied);
      if (!copy_mismatch.empty()) return fail("torn copy of version " + std::to_string(copied) + ": " + copy_mismatch);
      ++report.copies;
    }
  }
  return report;
}

struct Child {
  pid_t pid;
  int pipe;
};

template <class Body>
Child fork_child(Body&& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // A child outlives no failed test: it dies with the test process.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(fds[0]);
    try {
      body(fds[1]);
    } catch (const std::exception& e) {
      ReaderReport report;
      std::snprintf(report.failure, sizeof report.failure, "exception: %s", e.what());
      write_all(fds[1], &report, sizeof report);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

int exit_status(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("forked readers looping while the publisher writes see whole versions, never older ones") {
  const std::string name = unique_name("loop");
  WeightPublisher publisher(name, {.slots = 3});
  publisher.publish(make_params(1));
  std::vector<Child> readers;
  for (int r = 0; r < 2; ++r) {
    readers.push_back(fork_child([&](int out) {
      const ReaderReport report = read_until_last(name);
      write_all(out, &report, sizeof report);
    }));
  }
  for (std::uint64_t v = 2; v <= kVersions; ++v) {
    publisher.publish(make_params(v));
    // Now and then give the readers the CPU: on two cores they would otherwise see few versions.
    if (v % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (const Child& reader : readers) {
    ReaderReport report;
    REQUIRE(read_all(reader.pipe, &report, sizeof report));
    ::close(reader.pipe);
    INFO(report.failure);
    REQUIRE(std::string(report.failure).empty());
    REQUIRE(report.distinct_versions >= 10);
    REQUIRE(report.copies > 0);
    REQUIRE(exit_status(reader.pid) == 0);
  }
}

TEST_CASE("a reader SIGKILLed while it holds versions does not stop the publisher") {
  const std::string name = unique_name("killed");
  WeightPublisher publisher(name, {.slots = 3, .timeout = std::chrono::milliseconds(300)});
  publisher.publish(make_params(1));
  int go[2];
  REQUIRE(::pipe(go) == 0);
  // The reader leases version 1, asks for version 2, leases it too, and then waits to be killed.
  const Child reader = fork_child([&](int out) {
    ::close(go[1]);
    WeightSubscriber subscriber(name);
    const WeightLease first = subscriber.latest();
    write_all(out, "1", 1);
    char token = 0;
    if (!read_all(go[0], &token, 1)) ::_exit(4);
    const WeightLease second = subscriber.latest();
    write_all(out, second.version() == 2 ? "2" : "x", 1);
    // Killed by the test long before this ends.
    std::this_thread::sleep_for(std::chrono::seconds(60));
  });
  ::close(go[0]);
  char token = 0;
  REQUIRE(read_all(reader.pipe, &token, 1));
  publisher.publish(make_params(2));
  write_all(go[1], "g", 1);
  REQUIRE(read_all(reader.pipe, &token, 1));
  REQUIRE(token == '2');
  publisher.publish(make_params(3));
  // Versions 1 and 2 are pinned by a live process, version 3 is the newest: nowhere to write.
  REQUIRE_THROWS_AS(publisher.publish(make_params(4)), Timeout);

  REQUIRE(::kill(reader.pid, SIGKILL) == 0);
  // Reaped or not (a zombie holds nothing), its leases are reclaimed.
  REQUIRE(publisher.publish(make_params(4)) == 4);
  REQUIRE(publisher.publish(make_params(5)) == 5);
  REQUIRE(exit_status(reader.pid) == 128 + SIGKILL);
  ::close(reader.pipe);
  ::close(go[1]);
  const WeightLease lease = WeightSubscriber(name).latest();
  REQUIRE(lease.version() == 5);
  REQUIRE(params_mismatch(lease.tree(), 5).empty());
}

// Work semantics, proved with a scripted Work that needs no transport: completion, finish() run
// once, errors kept and rethrown on every wait, timeouts that leave the operation waitable, and
// the completed/chain helpers.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "tensortree/cuda_stream.hpp"
#include "tensortree/error.hpp"
#include "tensortree/work.hpp"

using namespace tensortree;
using namespace std::chrono_literals;

namespace {

// Completes on the `polls_needed`-th call of test() (never when negative); counts what ran.
class ScriptedWork : public Work {
 public:
  explicit ScriptedWork(int polls_needed) : polls_needed_(polls_needed) {}

  void complete_now() { polls_needed_ = polls_ + 1; }
  void fail_in_test(std::string message) { test_error_ = std::move(message); }
  void fail_in_finish(std::string message) { finish_error_ = std::move(message); }

  int polls() const { return polls_; }
  int finishes() const { return finishes_; }

 protected:
  bool test() override {
    ++polls_;
    if (!test_error_.empty()) throw BackendError(test_error_);
    return polls_needed_ >= 0 && polls_ >= polls_needed_;
  }

  void finish() override {
    ++finishes_;
    if (!finish_error_.empty()) throw CorruptData(finish_error_);
  }

 private:
  int polls_needed_;
  int polls_ = 0;
  int finishes_ = 0;
  std::string test_error_;
  std::string finish_error_;
};

// A Work with a native blocking wait, as MPI's Waitall: wait() must use it rather than poll.
class BlockingWork final : public ScriptedWork {
 public:
  BlockingWork() : ScriptedWork(-1) {}
  int blocks() const { return blocks_; }

 protected:
  void block() override {
    ++blocks_;
    complete_now();
  }

 private:
  int blocks_ = 0;
};

// A Work whose native wait is bounded (MPI's, under a group timeout): the first block() runs out
// of time, the second completes.
class BoundedWork final : public ScriptedWork {
 public:
  BoundedWork() : ScriptedWork(-1) {}

 protected:
  void block() override {
    if (++blocks_ == 1) throw Timeout("recv with rank 1 did not complete within 5 ms");
    complete_now();
  }

 private:
  int blocks_ = 0;
};

class ReceiveWork final : public ScriptedWork {
 public:
  explicit ReceiveWork(int source) : ScriptedWork(1), source_(source) {}
  int source_rank() const override { return source_; }

 private:
  int source_;
};

template <class Error>
std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& caught) {
    return caught.what();
  }
}

}  // namespace

TEST_CASE("is_completed polls without blocking and becomes true once the transfer finishes") {
  ScriptedWork work(3);
  CHECK_FALSE(work.is_completed());
  CHECK_FALSE(work.is_completed());
  CHECK(work.finishes() == 0);
  CHECK(work.is_completed());
  CHECK(work.finishes() == 1);
  CHECK(work.is_completed());
  CHECK(work.polls() == 3);  // a finished Work is not polled again
  CHECK(work.exception() == nullptr);
}

TEST_CASE("wait blocks until completion and runs finish exactly once however often it is called") {
  ScriptedWork work(5);
  work.wait();
  CHECK(work.polls() == 5);
  CHECK(work.finishes() == 1);
  work.wait();
  CHECK(work.is_completed());
  work.wait(10ms);
  CHECK(work.finishes() == 1);
}

TEST_CASE("wait uses the backend's native blocking wait when it has one") {
  BlockingWork work;
  work.wait();
  CHECK(work.blocks() == 1);
  CHECK(work.finishes() == 1);
  CHECK(work.is_completed());
}

TEST_CASE("an error from the transfer is rethrown on every wait and reported by exception()") {
  ScriptedWork work(-1);
  work.fail_in_test("link down on rank 3");
  CHECK(work.is_completed());  // failed counts as completed
  REQUIRE(work.exception() != nullptr);
  CHECK(message_of<BackendError>(work.exception()) == "link down on rank 3");
  CHECK_THROWS_WITH(work.wait(), "link down on rank 3");
  CHECK_THROWS_AS(work.wait(), BackendError);
  CHECK_THROWS_AS(work.wait(50ms), BackendError);
  CHECK(work.polls() == 1);
  CHECK(work.finishes() == 0);  // nothing to unpack after a failed transfer
}

TEST_CASE("an error thrown by finish is kept and rethrown on every wait, finish never rerun") {
  ScriptedWork work(2);
  work.fail_in_finish("checksum of 64 bytes differs");
  CHECK_THROWS_AS(work.wait(), CorruptData);
  CHECK_THROWS_WITH(work.wait(), "checksum of 64 bytes differs");
  CHECK(work.is_completed());
  CHECK(work.finishes() == 1);
}

TEST_CASE("wait with a timeout throws Timeout after the timeout and leaves the Work waitable") {
  ScriptedWork work(-1);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(work.wait(30ms), Timeout);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= 30ms);
  CHECK(elapsed < 30s);  // generous: only proves the wait ended
  CHECK(work.exception() == nullptr);  // a timeout is the waiter's verdict, not the operation's
  CHECK(work.finishes() == 0);

  work.complete_now();
  work.wait(30s);
  CHECK(work.finishes() == 1);
}

TEST_CASE("a Timeout from a bounded native wait leaves the Work in flight, unfailed and waitable again") {
  BoundedWork work;
  CHECK_THROWS_AS(work.wait(), Timeout);
  CHECK(work.exception() == nullptr);
  CHECK(work.finishes() == 0);
  CHECK_NOTHROW(work.wait());
  CHECK(work.is_completed());
  CHECK(work.finishes() == 1);
}

TEST_CASE("a zero timeout on a finished Work succeeds, on an unfinished one throws Timeout") {
  ScriptedWork done(1);
  done.wait(0ms);
  CHECK(done.finishes() == 1);
  ScriptedWork pending(-1);
  CHECK_THROWS_AS(pending.wait(0ms), Timeout);
}

TEST_CASE("source_rank is NotSupported unless the backend knows the sender") {
  ScriptedWork plain(1);
  plain.wait();
  CHECK_THROWS_AS(plain.source_rank(), NotSupported);
  ReceiveWork received(2);
  received.wait();
  CHECK(received.source_rank() == 2);
}

TEST_CASE("Work::completed is finished at once") {
  const WorkPtr work = Work::completed();
  CHECK(work->is_completed());
  work->wait();
  work->wait(0ms);
  CHECK(work->exception() == nullptr);
}

TEST_CASE("chain runs the second stage once, only after the first completed") {
  const auto first = std::make_shared<ScriptedWork>(3);
  auto second = std::make_shared<ScriptedWork>(2);
  int thens = 0;
  const WorkPtr chained = Work::chain(first, [&] {
    ++thens;
    CHECK(first->finishes() == 1);  // the first stage's results are ready for the second
    return second;
  });
  CHECK_FALSE(chained->is_completed());  // first: poll 1
  CHECK_FALSE(chained->is_completed());  // first: poll 2
  CHECK(thens == 0);
  CHECK_FALSE(chained->is_completed());  // first completes, second: poll 1
  CHECK(thens == 1);
  CHECK(chained->is_completed());  // second completes
  chained->wait();
  CHECK(thens == 1);
  CHECK(second->finishes() == 1);
}

TEST_CASE("chain's wait blocks through both stages; a null second stage means done") {
  const auto first = std::make_shared<ScriptedWork>(4);
  int thens = 0;
  const WorkPtr chained = Work::chain(first, [&]() -> WorkPtr {
    ++thens;
    return nullptr;
  });
  chained->wait();
  CHECK(thens == 1);
  CHECK(first->finishes() == 1);
  CHECK(chained->is_completed());
}

TEST_CASE("chain passes the first stage's error on and never starts the second") {
  const auto first = std::make_shared<ScriptedWork>(-1);
  first->fail_in_test("peer rank 1 vanished");
  bool started = false;
  const WorkPtr chained = Work::chain(first, [&] {
    started = true;
    return Work::completed();
  });
  CHECK_THROWS_WITH(chained->wait(), "peer rank 1 vanished");
  CHECK_THROWS_AS(chained->wait(), BackendError);
  CHECK_FALSE(started);
}

TEST_CASE("chain reports errors of the second stage and of the function that starts it") {
  SECTION("the second stage fails") {
    auto second = std::make_shared<ScriptedWork>(1);
    second->fail_in_finish("copy back of 12 bytes failed");
    const WorkPtr chained = Work::chain(Work::completed(), [&] { return second; });
    CHECK(chained->is_completed());
    CHECK_THROWS_AS(chained->wait(), CorruptData);
  }
  SECTION("the function throws") {
    const WorkPtr chained =
        Work::chain(Work::completed(), []() -> WorkPtr { throw InvalidArgument("shape [2, 3] expected"); });
    CHECK_THROWS_WITH(chained->wait(), "shape [2, 3] expected");
    CHECK_THROWS_AS(chained->wait(), InvalidArgument);
  }
}

TEST_CASE("chain's timeout leaves both stages in flight and waitable") {
  const auto first = std::make_shared<ScriptedWork>(-1);
  const WorkPtr chained = Work::chain(first, [] { return Work::completed(); });
  CHECK_THROWS_AS(chained->wait(20ms), Timeout);
  first->complete_now();
  chained->wait(30s);
  CHECK(first->finishes() == 1);
}

TEST_CASE("chain's source_rank comes from whichever stage received from any source") {
  const auto received = std::make_shared<ReceiveWork>(3);
  const WorkPtr staged = Work::chain(received, [] { return Work::completed(); });
  staged->wait();
  CHECK(staged->source_rank() == 3);

  const WorkPtr second_knows = Work::chain(Work::completed(), [] { return std::make_shared<ReceiveWork>(1); });
  second_knows->wait();
  CHECK(second_knows->source_rank() == 1);
}

TEST_CASE("chain refuses a null first stage") {
  CHECK_THROWS_AS(Work::chain(nullptr, [] { return Work::completed(); }), InvalidArgument);
}

TEST_CASE("then runs its continuation once, after the first Work completed and finished") {
  const auto first = std::make_shared<ScriptedWork>(3);
  int runs = 0;
  const WorkPtr continued = Work::then(first, [&] {
    ++runs;
    CHECK(first->finishes() == 1);  // the transfer's own last steps ran before the continuation
  });
  CHECK_FALSE(continued->is_completed());
  CHECK_FALSE(continued->is_completed());
  CHECK(runs == 0);
  CHECK(continued->is_completed());
  CHECK(runs == 1);
  continued->wait();
  continued->wait();
  CHECK(runs == 1);
}

TEST_CASE("then's wait blocks until the first Work completed, then runs the continuation") {
  const auto first = std::make_shared<BlockingWork>();
  int runs = 0;
  const WorkPtr continued = Work::then(first, [&] { ++runs; });
  continued->wait();
  CHECK(first->blocks() == 1);
  CHECK(runs == 1);
}

TEST_CASE("then never runs its continuation after a failed first Work and keeps its error") {
  const auto first = std::make_shared<ScriptedWork>(-1);
  first->fail_in_test("peer rank 2 vanished");
  bool ran = false;
  const WorkPtr continued = Work::then(first, [&] { ran = true; });
  CHECK_THROWS_WITH(continued->wait(), "peer rank 2 vanished");
  CHECK_THROWS_AS(continued->wait(), BackendError);
  CHECK(continued->exception() != nullptr);
  CHECK_FALSE(ran);
}

TEST_CASE("then lets on_error replace the first Work's error with a clearer one") {
  const auto first = std::make_shared<ScriptedWork>(-1);
  first->fail_in_test("message of 40 bytes, 48 expected");
  int handled = 0;
  const WorkPtr continued = Work::then(
      first, [] {},
      [&](std::exception_ptr error) {
        ++handled;
        try {
          std::rethrow_exception(error);
        } catch (const BackendError& e) {
          throw SchemaMismatch(std::string("layout differs: ") + e.what());
        }
      });
  CHECK_THROWS_WITH(continued->wait(), "layout differs: message of 40 bytes, 48 expected");
  CHECK_THROWS_AS(continued->wait(), SchemaMismatch);
  CHECK(handled == 1);

  SECTION("an on_error that returns keeps the original error") {
    const auto failed = std::make_shared<ScriptedWork>(-1);
    failed->fail_in_test("rank 0 aborted");
    const WorkPtr kept = Work::then(failed, [] {}, [](std::exception_ptr) {});
    CHECK_THROWS_AS(kept->wait(), BackendError);
  }
}

TEST_CASE("then reports the continuation's error as its own") {
  const WorkPtr continued = Work::then(Work::completed(), [] { throw CorruptData("copy back of 12 bytes failed"); });
  CHECK(continued->is_completed());
  CHECK_THROWS_WITH(continued->wait(), "copy back of 12 bytes failed");
  CHECK_THROWS_AS(continued->wait(), CorruptData);
}

TEST_CASE("then's timeout leaves the first Work in flight; source_rank is the first Work's") {
  const auto first = std::make_shared<ScriptedWork>(-1);
  int runs = 0;
  const WorkPtr continued = Work::then(first, [&] { ++runs; });
  CHECK_THROWS_AS(continued->wait(20ms), Timeout);
  CHECK(runs == 0);
  first->complete_now();
  continued->wait(30s);
  CHECK(runs == 1);

  const WorkPtr received = Work::then(std::make_shared<ReceiveWork>(3), [] {});
  received->wait();
  CHECK(received->source_rank() == 3);
}

TEST_CASE("then refuses a null first Work") {
  CHECK_THROWS_AS(Work::then(nullptr, [] {}), InvalidArgument);
}

TEST_CASE("a described Work names its operation and number in its errors and timeouts, keeping their types") {
  ScriptedWork failing(-1);
  failing.describe("all_gather", 12);
  failing.fail_in_test("link down on rank 3");
  CHECK(failing.op() == "all_gather");
  CHECK(failing.sequence() == 12);
  CHECK_THROWS_AS(failing.wait(), BackendError);
  CHECK_THROWS_WITH(failing.wait(), "all_gather #12: link down on rank 3");
  CHECK(message_of<BackendError>(failing.exception()) == "all_gather #12: link down on rank 3");

  ScriptedWork unpacking(1);
  unpacking.describe("recv", 4);
  unpacking.fail_in_finish("checksum of 64 bytes differs");
  CHECK_THROWS_AS(unpacking.wait(), CorruptData);
  CHECK_THROWS_WITH(unpacking.wait(), "recv #4: checksum of 64 bytes differs");

  ScriptedWork slow(-1);
  slow.describe("broadcast", 7);
  CHECK_THROWS_WITH(slow.wait(5ms), "broadcast #7: broadcast did not complete within 5 ms");
  CHECK(slow.exception() == nullptr);

  BoundedWork bounded;
  bounded.describe("recv", 2);
  CHECK_THROWS_WITH(bounded.wait(), "recv #2: recv with rank 1 did not complete within 5 ms");
  bounded.wait();  // still in flight after the Timeout, as before
}

TEST_CASE("then, chain and all take their first Work's name without naming its errors twice") {
  auto first = std::make_shared<ScriptedWork>(-1);
  first->describe("send", 3);
  first->fail_in_test("peer gone");
  const WorkPtr after = Work::then(first, [] {});
  const WorkPtr chained = Work::chain(first, [] { return WorkPtr(); });
  const WorkPtr both = Work::all({first, Work::completed()});
  for (const WorkPtr& composed : {after, chained, both}) {
    CHECK(composed->op() == "send");
    CHECK(composed->sequence() == 3);
    CHECK_THROWS_WITH(composed->wait(), "send #3: peer gone");
  }
  CHECK(Work::completed()->op().empty());
  CHECK(Work::completed()->sequence() == 0);
}

TEST_CASE("make_stream_wait on a Work no engine orders on the device waits for it on the host") {
  ScriptedWork work(3);
  work.make_stream_wait();
  CHECK(work.is_completed());
  CHECK(work.finishes() == 1);

  ScriptedWork failing(-1);
  failing.fail_in_test("link down");
  CHECK_THROWS_WITH(failing.make_stream_wait(), "link down");
}

TEST_CASE("a CudaStreamGuard sets this thread's current stream for its scope; a null one keeps it") {
  int a = 0;
  int b = 0;
  CHECK(current_cuda_stream() == nullptr);
  {
    const CudaStreamGuard outer(&a);
    CHECK(current_cuda_stream() == &a);
    {
      const CudaStreamGuard unset(nullptr);  // an option left unset
      CHECK(current_cuda_stream() == &a);
      const CudaStreamGuard inner(&b);
      CHECK(current_cuda_stream() == &b);
      std::thread([] { CHECK(current_cuda_stream() == nullptr); }).join();  // per thread
    }
    CHECK(current_cuda_stream() == &a);
  }
  CHECK(current_cuda_stream() == nullptr);
}

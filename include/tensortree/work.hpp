// Work: the handle of an operation in flight (c10d's Work). Every asynchronous operation returns
// one; the synchronous forms are the asynchronous ones followed by wait(). One thread at a time
// may use a Work; finish() runs on whichever thread first sees it complete.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/cuda_stream.hpp"
#include "tensortree/export.hpp"

namespace tensortree {

class TT_API Work {
 public:
  Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  // An operation still in flight is cancelled where the backend can (receives) and waited for
  // otherwise: its buffers must outlive it.
  virtual ~Work() = default;

  // Never blocks: drives the operation forward and says whether it has finished (or failed).
  bool is_completed();
  // Blocks until the operation has finished; rethrows its error, if any, on every call.
  void wait();
  // As wait(), but throws Timeout once `timeout` has passed; the operation stays in flight and may
  // be waited for again.
  void wait(std::chrono::milliseconds timeout);
  // The error the operation ended with, or null.
  std::exception_ptr exception() const { return error_; }
  // Makes `stream` (null: this thread's current stream, else the legacy default stream) wait until
  // the operation has finished, so that CUDA work queued there next sees its results (c10d's
  // Work::wait on a CUDA stream). An engine that can (NCCL) queues the wait on the device and
  // returns at once: the Work is then still to be waited for or dropped. Every other Work is
  // waited for here, on the host, which orders every stream after it; its error is rethrown.
  void make_stream_wait(CudaStreamHandle stream = nullptr);
  // For a receive from kAnySource, once complete: the group rank that sent. NotSupported otherwise.
  virtual int source_rank() const;

  // What the operation is (c10d's op type and sequence number): its name ("all_reduce", "send")
  // and its number in its group, counted from 1, collectives and point-to-point apart (every
  // member counts the same collectives; see GroupOptions::debug_checks). Empty and 0 for a Work
  // no group posted. A Work made by then/chain/all has its first Work's.
  std::string_view op() const { return op_; }
  std::uint64_t sequence() const { return sequence_; }
  // Names the operation. Its timeouts and errors then begin "all_reduce #12: ", so that a log
  // says which call of a long run failed. The group does this for everything it posts.
  void describe(std::string_view op, std::uint64_t sequence);

  // A Work that is already complete (what a synchronous step returns in an asynchronous slot).
  [[nodiscard]] static std::shared_ptr<Work> completed();
  // The one way to say "when `first` has finished, do `fn`" (copy back from a staging buffer, AVG's
  // division, unpacking a received tree). The returned Work completes with `first`; `fn` runs once,
  // on the thread that sees it complete, and only if `first` succeeded: its exception becomes the
  // returned Work's error. When `first` failed, `on_error` (if given) receives that error and may
  // throw a clearer one; otherwise `first`'s error is the returned Work's. source_rank() is `first`'s.
  [[nodiscard]] static std::shared_ptr<Work> then(std::shared_ptr<Work> first, std::function<void()> fn,
                                    std::function<void(std::exception_ptr)> on_error = nullptr);
  // The chaining form: after `first` succeeded, `next` starts a second operation (e.g. shapes, then
  // data); the returned Work completes when that one has. `next` may return null (nothing more).
  [[nodiscard]] static std::shared_ptr<Work> chain(std::shared_ptr<Work> first, std::function<std::shared_ptr<Work>()> next);
  // Completes when every one of `works` has (posted together: a batch served by several
  // transports); the first error, in order, is its error. source_rank() is the first one's.
  [[nodiscard]] static std::shared_ptr<Work> all(std::vector<std::shared_ptr<Work>> works);

 protected:
  // Non-blocking progress: true once the transfer has finished. May throw.
  virtual bool test() = 0;
  // Blocks until test() would return true; backends with a native blocking wait override it.
  virtual void block();
  // Runs once on the waiting thread after the transfer finished (unpacking, copying back). May throw.
  virtual void finish() {}
  // Queues on the device a wait of `stream` for the operation's end, if this Work's engine can;
  // false (the default) leaves the wait to the host.
  virtual bool queue_stream_wait(CudaStreamHandle stream);
  // A composed Work takes the name of the Work it starts with, without prefixing its errors again.
  void inherit_description(const Work& first);

 private:
  bool settle(bool done);
  // Keeps `error` as the operation's error, named as describe() asked.
  void fail(std::exception_ptr error);
  // "all_reduce #12: " for a described operation; empty otherwise.
  std::string context() const;

  bool finished_ = false;
  std::exception_ptr error_;
  std::string op_;
  std::uint64_t sequence_ = 0;
  // Whether this Work's own errors get the prefix (a composed Work's come from its parts, which
  // have it already).
  bool names_errors_ = false;
};

using WorkPtr = std::shared_ptr<Work>;

// An asynchronous operation together with the outputs it allocated: valid once work->wait() returned.
template <class T>
struct [[nodiscard]] Pending {
  WorkPtr work;
  T result;

  T& get() {
    work->wait();
    return result;
  }
};

}  // namespace tensortree

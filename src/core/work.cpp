#include "tensortree/work.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

class CompletedWork final : public Work {
 protected:
  bool test() override { return true; }
};

// `first`, then `fn` once `first` succeeded (Work::then).
class ThenWork final : public Work {
 public:
  ThenWork(WorkPtr first, std::function<void()> fn, std::function<void(std::exception_ptr)> on_error)
      : first_(std::move(first)), fn_(std::move(fn)), on_error_(std::move(on_error)) {
    inherit_description(*first_);
  }

  int source_rank() const override { return first_->source_rank(); }

 protected:
  bool test() override { return first_->is_completed(); }
  // first's error is raised by finish(), where on_error may translate it; a Timeout is not an
  // error (first is still in flight) and goes to the waiter as it is.
  void block() override {
    try {
      first_->wait();
    } catch (const Timeout&) {
      throw;
    } catch (...) {
    }
  }
  void finish() override {
    if (std::exception_ptr error = first_->exception()) {
      if (on_error_) on_error_(error);
      std::rethrow_exception(error);
    }
    if (fn_) fn_();
  }

 private:
  WorkPtr first_;
  std::function<void()> fn_;
  std::function<void(std::exception_ptr)> on_error_;
};

// `first`, then the Work that `then` returns; the chain completes when the second one has.
// Every one of several Works (Work::all).
class AllWork final : public Work {
 public:
  explicit AllWork(std::vector<WorkPtr> works) : works_(std::move(works)) {
    if (!works_.empty()) inherit_description(*works_.front());
  }

  int source_rank() const override {
    if (works_.empty()) return Work::source_rank();
    return works_.front()->source_rank();
  }

 protected:
  bool test() override {
    for (; done_ < works_.size(); ++done_) {
      if (!works_[done_]->is_completed()) return false;
    }
    return true;
  }
  void block() override {
    for (; done_ < works_.size(); ++done_) {
      try {
        works_[done_]->wait();
      } catch (const Timeout&) {
        throw;
      } catch (...) {
      }
    }
  }
  void finish() override {
    for (const WorkPtr& work : works_) {
      if (std::exception_ptr error = work->exception()) std::rethrow_exception(error);
    }
  }

 private:
  std::vector<WorkPtr> works_;
  std::size_t done_ = 0;
};

class ChainedWork final : public Work {
 public:
  ChainedWork(WorkPtr first, std::function<WorkPtr()> then) : first_(std::move(first)), then_(std::move(then)) {
    inherit_description(*first_);
  }

  // The receive that learned the source may be either stage (a staged receive learns it first).
  int source_rank() const override {
    if (second_) {
      try {
        return second_->source_rank();
      } catch (const NotSupported&) {
      }
    }
    return first_->source_rank();
  }

 protected:
  bool test() override {
    if (!second_) {
      if (!first_->is_completed()) return false;
      start_second();
    }
    if (!second_->is_completed()) return false;
    second_->wait();  // rethrows the second stage's error
    return true;
  }

  void block() override {
    if (!second_) start_second();
    second_->wait();
  }

 private:
  void start_second() {
    first_->wait();  // rethrows the first stage's error
    second_ = then_();
    if (!second_) second_ = Work::completed();
  }

  WorkPtr first_;
  std::function<WorkPtr()> then_;
  WorkPtr second_;
};

// `error` again, of the same type, its message behind `context`: the first of the types listed it is (a
// subtype before Error). Errors of other libraries (and std::bad_alloc) are kept as they are.
template <class First, class... Rest>
std::exception_ptr prefixed_as(const std::exception_ptr& error, const std::string& context) {
  try {
    std::rethrow_exception(error);
  } catch (const First& typed) {
    return std::make_exception_ptr(First(fmt::format("{}{}", context, typed.what())));
  } catch (...) {
    if constexpr (sizeof...(Rest) > 0) {
      return prefixed_as<Rest...>(error, context);
    } else {
      return error;
    }
  }
}

std::exception_ptr with_context(const std::exception_ptr& error, const std::string& context) {
  return prefixed_as<InvalidArgument, SchemaMismatch, CorruptData, BackendError, Timeout, NotSupported, Error>(
      error, context);
}

}  // namespace

void Work::describe(std::string_view op, std::uint64_t sequence) {
  op_ = op;
  sequence_ = sequence;
  names_errors_ = true;
}

void Work::inherit_description(const Work& first) {
  op_ = first.op_;
  sequence_ = first.sequence_;
  names_errors_ = false;
}

std::string Work::context() const { return names_errors_ ? fmt::format("{} #{}: ", op_, sequence_) : std::string(); }

void Work::fail(std::exception_ptr error) {
  error_ = names_errors_ ? with_context(std::move(error), context()) : std::move(error);
  finished_ = true;
}

bool Work::is_completed() {
  if (finished_) return true;
  try {
    return settle(test());
  } catch (...) {
    fail(std::current_exception());
    return true;
  }
}

void Work::wait() {
  if (!finished_) {
    try {
      block();
      settle(true);
    } catch (const Timeout&) {
      // A bounded wait ran out: the operation is still in flight and may be waited for again.
      if (!names_errors_) throw;
      std::rethrow_exception(with_context(std::current_exception(), context()));
    } catch (...) {
      fail(std::current_exception());
    }
  }
  if (error_) std::rethrow_exception(error_);
}

void Work::wait(std::chrono::milliseconds timeout) {
  detail::wait_bounded([this] { return is_completed(); }, timeout, [&] {
    const std::string_view what = op_.empty() ? std::string_view("operation") : std::string_view(op_);
    return Timeout(fmt::format("{}{} did not complete within {} ms", context(), what, timeout.count()));
  });
  if (error_) std::rethrow_exception(error_);
}

void Work::make_stream_wait(CudaStreamHandle stream) {
  if (!finished_ && queue_stream_wait(stream != nullptr ? stream : current_cuda_stream())) return;
  wait();
}

bool Work::queue_stream_wait(CudaStreamHandle) { return false; }

int Work::source_rank() const {
  throw NotSupported("source_rank is known only for a completed receive from kAnySource");
}

void Work::block() {
  detail::poll_until([this] { return test(); }, std::nullopt);
}

bool Work::settle(bool done) {
  if (!done) return false;
  // finished_ is set first so that finish() runs exactly once even if it throws.
  finished_ = true;
  try {
    finish();
  } catch (...) {
    fail(std::current_exception());
  }
  return true;
}

std::shared_ptr<Work> Work::completed() { return std::make_shared<CompletedWork>(); }

std::shared_ptr<Work> Work::then(std::shared_ptr<Work> first, std::function<void()> fn,
                                 std::function<void(std::exception_ptr)> on_error) {
  if (!first) throw InvalidArgument("Work::then needs a first Work (got null)");
  return std::make_shared<ThenWork>(std::move(first), std::move(fn), std::move(on_error));
}

std::shared_ptr<Work> Work::all(std::vector<std::shared_ptr<Work>> works) {
  for (const WorkPtr& work : works) {
    if (!work) throw InvalidArgument("Work::all: a null Work");
  }
  return std::make_shared<AllWork>(std::move(works));
}

std::shared_ptr<Work> Work::chain(std::shared_ptr<Work> first, std::function<std::shared_ptr<Work>()> next) {
  if (!first) throw InvalidArgument("Work::chain needs a first Work (got null)");
  return std::make_shared<ChainedWork>(std::move(first), std::move(next));
}

}  // namespace tensortree

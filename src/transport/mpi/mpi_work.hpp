// MpiWork: the Work of the MPI backend. It holds the requests of one operation and everything they
// read or write until they complete, checks each receive's length on completion, and runs the
// operation's last steps (AVG's division, through Work::then) once everything has arrived.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/abort_signal.hpp"
#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "transport/mpi/mpi_handles.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/work.hpp"

namespace tensortree::detail {

// What a blocking wait on one operation may take, and what its Timeout names.
struct WaitLimit {
  const char* operation = "operation";  // a string literal: the backend operation's name
  int peer = -1;                        // the group rank at the other end; -1 for a collective
  std::chrono::milliseconds timeout = kUnbounded;
  // Raised by the engine's abort: the wait ends at once with BackendError.
  std::shared_ptr<const AbortSignal> aborted;
};

// The requests of one operation and everything they read or write (tensors, derived datatypes,
// count arrays), kept until they complete.
class MpiWork final : public Work {
 public:
  MpiWork(int rank, WaitLimit limit) : rank_(rank), limit_(limit) {}
  MpiWork(const MpiWork&) = delete;
  MpiWork& operator=(const MpiWork&) = delete;
  // Cancels the receives still pending and waits for the rest up to the group's timeout (not at
  // all once a wait timed out or the backend was aborted); what is still in flight after that is
  // abandoned (comm/abandoned_operations.hpp) rather than waited for forever.
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
  // True once every request has completed; never throws (a failed request counts as completed).
  bool settled_quietly();
  void abandon_pending();

  int rank_;
  WaitLimit limit_;
  std::vector<MPI_Request> requests_;
  std::vector<MPI_Status> statuses_;
  // Requests [0, completed_) have completed (in order) within block(); their statuses are final.
  std::size_t completed_ = 0;
  bool timed_out_ = false;
  std::vector<Receive> receives_;
  std::vector<Tensor> tensors_;
  std::vector<MpiDatatype> datatypes_;
  std::vector<std::shared_ptr<const void>> arrays_;
  int source_ = -1;
};

// The Timeout of a wait on `limit`'s operation that ran past it, on group rank `rank`.
Timeout timed_out(const WaitLimit& limit, int rank);

// Polls `done` within `limit`: Timeout past it, BackendError once the backend is aborted.
template <class Done>
void wait_within(const WaitLimit& limit, int rank, Done&& done) {
  const auto done_or_aborted = [&] {
    if (limit.aborted) {
      limit.aborted->throw_if_raised([&] { return fmt::format("rank {}: {}", rank, limit.operation); });
    }
    return done();
  };
  wait_bounded(done_or_aborted, limit.timeout, [&] { return timed_out(limit, rank); }, WaitStyle::Spin);
}

}  // namespace tensortree::detail

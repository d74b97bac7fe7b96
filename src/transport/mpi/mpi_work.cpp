#include "transport/mpi/mpi_work.hpp"

#include <memory>
#include <string>
#include <vector>

#include "comm/abandoned_operations.hpp"
#include "core/text_format.hpp"
#include "transport/mpi/mpi_check.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

MpiWork::~MpiWork() {
  if (mpi_is_finalized()) return;
  // A receive nobody will match would block forever; collectives and sends cannot be cancelled.
  for (const Receive& receive : receives_) {
    if (requests_[receive.request] != MPI_REQUEST_NULL) MPI_Cancel(&requests_[receive.request]);
  }
  const bool hopeless = timed_out_ || (limit_.aborted && limit_.aborted->raised());
  const auto limit = hopeless ? std::chrono::milliseconds::zero() : limit_.timeout;
  if (!poll_until([this] { return settled_quietly(); }, deadline_after(limit), WaitStyle::Spin)) abandon_pending();
}

bool MpiWork::settled_quietly() {
  for (; completed_ < requests_.size(); ++completed_) {
    int complete = 0;
    if (MPI_Test(&requests_[completed_], &complete, MPI_STATUS_IGNORE) == MPI_SUCCESS && !complete) return false;
  }
  return true;
}

// The transfer may still read or write everything the Work kept, so all of it goes with the
// requests; MPI forbids freeing an active collective's request, so they are tested, never freed.
void MpiWork::abandon_pending() {
  struct InFlight {
    std::vector<MPI_Request> requests;
    std::vector<Tensor> tensors;
    std::vector<MpiDatatype> datatypes;
    std::vector<std::shared_ptr<const void>> arrays;
  };
  auto held = std::make_shared<InFlight>();
  held->requests.assign(requests_.begin() + static_cast<std::ptrdiff_t>(completed_), requests_.end());
  held->tensors = std::move(tensors_);
  held->datatypes = std::move(datatypes_);
  held->arrays = std::move(arrays_);
  abandon_operation([held] {
    if (mpi_is_finalized()) return false;
    for (MPI_Request& request : held->requests) {
      int complete = 0;
      if (MPI_Test(&request, &complete, MPI_STATUS_IGNORE) == MPI_SUCCESS && !complete) return false;
    }
    return true;
  });
}

// Only the requests a timed-out block() has not seen complete: MPI would overwrite the statuses of
// the others (null requests by now) with empty ones.
bool MpiWork::test() {
  statuses_.resize(requests_.size());
  int done = 0;
  check_status(MPI_Testall(static_cast<int>(requests_.size() - completed_), requests_.data() + completed_, &done,
                           statuses_.data() + completed_),
               "MPI_Testall");
  return done != 0;
}

// The requests one at a time, in order, rather than all at once: Open MPI 4.1's MPI_Waitall can
// spin forever once a request has failed (a truncated receive) while other messages are arriving.
// Polled rather than waited for, so that the group's timeout bounds the wait; a request that
// completed keeps its status (MPI_Test sets it to MPI_REQUEST_NULL and is not asked again, even by
// a second block() after a Timeout).
void MpiWork::block() {
  statuses_.resize(requests_.size());
  const auto done = [&] {
    for (; completed_ < requests_.size(); ++completed_) {
      int complete = 0;
      check_status(MPI_Test(&requests_[completed_], &complete, &statuses_[completed_]), "MPI_Test");
      if (!complete) return false;
    }
    return true;
  };
  try {
    wait_within(limit_, rank_, done);
  } catch (const Timeout&) {
    timed_out_ = true;
    throw;
  }
}

Timeout timed_out(const WaitLimit& limit, int rank) {
  const std::string with_peer = limit.peer >= 0 ? fmt::format(" with rank {}", limit.peer) : std::string();
  return Timeout(fmt::format("rank {}: {}{} did not complete within the group's timeout of {} ms "
                             "(GroupOptions::timeout); it is still posted: wait again, or end the group with "
                             "Group::abort", rank, limit.operation, with_peer, limit.timeout.count()));
}

// MPI_ERR_IN_STATUS means the real error sits in one request's status.
void MpiWork::check_status(int status, const char* call) const {
  if (status == MPI_ERR_IN_STATUS) {
    for (const MPI_Status& each : statuses_) {
      if (each.MPI_ERROR != MPI_SUCCESS && each.MPI_ERROR != MPI_ERR_PENDING) raise(each.MPI_ERROR, call);
    }
  }
  if (status != MPI_SUCCESS) raise(status, call);
}

// A message longer than the receiving tensor is a mismatch of the caller's, as a shorter one is
// (check_receive); everything else is MPI's failure.
void MpiWork::raise(int error, const char* call) const {
  int error_class = error;
  MPI_Error_class(error, &error_class);
  if (error_class == MPI_ERR_TRUNCATE) {
    throw InvalidArgument(fmt::format(
        "rank {} received a message longer than the receiving tensor ({}: MPI_ERR_TRUNCATE)", rank_, call));
  }
  throw_mpi_error(error, call, __FILE__, __LINE__);
}

// A message shorter than the receiving tensor completes without error in MPI; it is an error here.
void MpiWork::check_receive(const Receive& receive) const {
  const MPI_Status& status = statuses_[receive.request];
  MPI_Count received = 0;
  TT_MPI_CHECK(MPI_Get_elements_x(&status, receive.datatype, &received));
  if (received != receive.expected_elements) {
    throw InvalidArgument(fmt::format("rank {} received {} elements from rank {} (tag {}) into a tensor of {} elements",
                                      rank_, received, status.MPI_SOURCE, status.MPI_TAG, receive.expected_elements));
  }
}

void MpiWork::finish() {
  for (const Receive& receive : receives_) {
    check_receive(receive);
    if (receive.any_source && source_ < 0) source_ = statuses_[receive.request].MPI_SOURCE;
  }
}

int MpiWork::source_rank() const {
  if (source_ < 0) {
    throw NotSupported("source_rank is known only once a receive from kAnySource has completed");
  }
  return source_;
}

}  // namespace tensortree::detail

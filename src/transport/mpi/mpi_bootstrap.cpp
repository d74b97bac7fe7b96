#include "transport/mpi/mpi_bootstrap.hpp"

#include <algorithm>
#include <climits>
#include <memory>
#include <vector>
#include <string>
#include <utility>

#include "comm/abandoned_operations.hpp"
#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "transport/mpi/mpi_check.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

int byte_count(std::size_t nbytes, const char* operation) {
  if (nbytes > static_cast<std::size_t>(INT_MAX)) {
    throw InvalidArgument(fmt::format("bootstrap {} of {} bytes: the bootstrap carries small messages only", operation,
                                      nbytes));
  }
  return static_cast<int>(nbytes);
}

}  // namespace

MpiBootstrap::MpiBootstrap(MpiComm comm, std::chrono::milliseconds timeout)
    : comm_(std::move(comm)), timeout_(timeout) {
  TT_MPI_CHECK(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN));
  TT_MPI_CHECK(MPI_Comm_rank(comm_.get(), &rank_));
  TT_MPI_CHECK(MPI_Comm_size(comm_.get(), &size_));
}

std::vector<std::byte> MpiBootstrap::all_gather(std::span<const std::byte> mine) {
  const int count = byte_count(mine.size() * static_cast<std::size_t>(size_), "all_gather");
  auto all = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(count));
  auto sent = std::make_shared<std::vector<std::byte>>(mine.begin(), mine.end());
  MPI_Request request = MPI_REQUEST_NULL;
  TT_MPI_CHECK(MPI_Iallgather(sent->data(), static_cast<int>(sent->size()), MPI_BYTE, all->data(),
                              static_cast<int>(sent->size()), MPI_BYTE, comm_.get(), &request));
  wait(request, {all, sent}, "all_gather");
  return std::move(*all);
}

void MpiBootstrap::broadcast(std::span<std::byte> bytes, int root) {
  auto buffer = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
  MPI_Request request = MPI_REQUEST_NULL;
  TT_MPI_CHECK(MPI_Ibcast(buffer->data(), byte_count(buffer->size(), "broadcast"), MPI_BYTE, root, comm_.get(),
                          &request));
  wait(request, {buffer}, "broadcast");
  std::copy(buffer->begin(), buffer->end(), bytes.begin());
}

void MpiBootstrap::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  TT_MPI_CHECK(MPI_Ibarrier(comm_.get(), &request));
  wait(request, {}, "barrier");
}

// MPI_Comm_split has no nonblocking form: a bounded barrier first, so that a member that is gone
// costs a Timeout here rather than a hang inside the split.
std::unique_ptr<Bootstrap> MpiBootstrap::split(int color, int key) {
  barrier();
  MPI_Comm raw = MPI_COMM_NULL;
  TT_MPI_CHECK(MPI_Comm_split(comm_.get(), color < 0 ? MPI_UNDEFINED : color, key, &raw));
  if (raw == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiBootstrap>(MpiComm(raw), timeout_);
}

// The rounds work on buffers of their own (they are small), so that a round that times out can
// leave its request in flight together with those buffers (comm/abandoned_operations.hpp) while
// the caller's memory goes free.
void MpiBootstrap::wait(MPI_Request request, std::vector<std::shared_ptr<std::vector<std::byte>>> buffers,
                        const char* operation) const {
  auto pending = std::make_shared<MPI_Request>(request);
  const auto finished = [pending](int& status) {
    int complete = 0;
    status = MPI_Test(pending.get(), &complete, MPI_STATUS_IGNORE);
    return status != MPI_SUCCESS || complete != 0;
  };
  int status = MPI_SUCCESS;
  if (poll_until([&] { return finished(status); }, deadline_after(timeout_), WaitStyle::Spin)) {
    TT_MPI_CHECK(status);
    return;
  }
  abandon_operation([finished, buffers] {
    int ignored = MPI_SUCCESS;
    return !mpi_is_finalized() && finished(ignored);
  });
  throw Timeout(fmt::format("rank {}: the group's bootstrap {} did not complete within the group's timeout of {} ms "
                            "(GroupOptions::timeout): a member is gone or not taking part; end the group with "
                            "Group::abort", rank_, operation, timeout_.count()));
}

MpiComm duplicate_comm(MPI_Comm comm) {
  MPI_Comm raw = MPI_COMM_NULL;
  TT_MPI_CHECK(MPI_Comm_dup(comm, &raw));
  return MpiComm(raw);
}

}  // namespace tensortree::detail

// Catch2 main for distributed tests: every rank runs the same test cases, each rank's output is
// tagged "[rank N] ", and if any rank fails, every rank reports which ones and exits non-zero.
#include <mpi.h>

#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "catch_session.hpp"
#include "dist_support.hpp"
#include "line_prefix_streambuf.hpp"
#include "tensortree/error.hpp"

namespace {

using tensortree::test::LinePrefixStreambuf;

class MpiSession {
 public:
  MpiSession(int& argc, char**& argv) {
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw tensortree::BackendError("MPI_Init_thread failed");
    }
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() { MPI_Finalize(); }
};

// Points a stream at another streambuf for as long as it lives.
class StreamRedirect {
 public:
  StreamRedirect(std::ostream& stream, std::streambuf* buffer)
      : stream_(stream), original_(stream.rdbuf(buffer)) {}
  StreamRedirect(const StreamRedirect&) = delete;
  StreamRedirect& operator=(const StreamRedirect&) = delete;
  ~StreamRedirect() {
    stream_.flush();
    stream_.rdbuf(original_);
  }

 private:
  std::ostream& stream_;
  std::streambuf* original_;
};

// Catch's return value: failed test cases (capped at 255), or non-zero for a bad command line.
// Ranks write through a pty, so Catch would colour; escape codes spanning lines garble the tags.
int run_catch(int argc, char* argv[]) {
  return tensortree::test::run_catch_session(argc, argv, tensortree::test::CatchColour::No);
}

// Failed test cases per rank, summed over all ranks so that every rank holds the whole table.
std::vector<int> failures_by_rank(int local_failures) {
  std::vector<int> failures(static_cast<std::size_t>(tensortree::test::world_size()), 0);
  failures[static_cast<std::size_t>(tensortree::test::world_rank())] = local_failures;
  MPI_Allreduce(MPI_IN_PLACE, failures.data(), static_cast<int>(failures.size()), MPI_INT, MPI_SUM,
                MPI_COMM_WORLD);
  return failures;
}

// Prints the verdict for the whole job; returns whether every rank passed.
bool report(const std::vector<int>& failures) {
  std::string failed_ranks;
  for (std::size_t rank = 0; rank < failures.size(); ++rank) {
    if (failures[rank] == 0) continue;
    failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(rank) + " (" +
                    std::to_string(failures[rank]) + ")";
  }
  if (failed_ranks.empty()) {
    std::cout << "distributed run passed on all " << failures.size() << " ranks\n";
    return true;
  }
  std::cerr << "distributed run FAILED; failing ranks (failed test cases): " << failed_ranks << '\n';
  return false;
}

int run_all_ranks(int argc, char* argv[]) {
  const std::string prefix = "[rank " + std::to_string(tensortree::test::world_rank()) + "] ";
  LinePrefixStreambuf tagged_out(std::cout.rdbuf(), prefix);
  // std::cerr and std::clog share one file descriptor, so they share one line buffer.
  LinePrefixStreambuf tagged_err(std::cerr.rdbuf(), prefix);
  StreamRedirect out(std::cout, &tagged_out);
  StreamRedirect err(std::cerr, &tagged_err);
  StreamRedirect log(std::clog, &tagged_err);
  return report(failures_by_rank(run_catch(argc, argv))) ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  try {
    MpiSession mpi(argc, argv);
    const tensortree::test::ContextScope context;
    return run_all_ranks(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "distributed test harness: " << error.what() << '\n';
    return 1;
  }
}

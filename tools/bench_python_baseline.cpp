// The C++ side of tools/bench_python.py: the same calls the Python benchmark makes, timed in C++
// on the same buffer or publication, so that its table compares the two in one run. Prints the mean
// seconds per call.
//
//   bench_python_baseline sample DIR BATCH SECONDS     ReplayBuffer::open(DIR).sample(BATCH)
//   bench_python_baseline extend DIR ROWS SECONDS      extend of ROWS rows of the buffer's layout
//   bench_python_baseline memcpy BYTES RING SECONDS    memcpy of BYTES into the next slot of a ring of
//                                                      RING bytes (touched), as extend writes a ring
//   bench_python_baseline latest NAME SECONDS          WeightSubscriber(NAME).latest(), released
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/weights.hpp"

using namespace tensortree;

namespace {

double time_sample(const std::string& dir, std::int64_t batch, double seconds) {
  ReplayBuffer replay = ReplayBuffer::open(dir);
  return bench::time_per_call([&] { (void)replay.sample(batch); }, seconds);
}

// A tree of `rows` rows in the buffer's layout (each leaf's row shape from its storage), filled.
double time_extend(const std::string& dir, std::int64_t rows, double seconds) {
  ReplayBuffer replay = ReplayBuffer::open(dir);
  TensorTree trajectory(Shape{rows});
  for (const auto& [path, leaf] : replay.storage().leaves()) {
    Shape shape = leaf.shape();
    shape[0] = rows;
    Tensor filled = Tensor::empty(shape, {leaf.dtype()});
    std::memset(filled.data_ptr(), 7, filled.nbytes());
    trajectory.set(path, filled);
  }
  return bench::time_per_call([&] { replay.extend(trajectory); }, seconds);
}

double time_memcpy(std::size_t bytes, std::size_t ring_bytes, double seconds) {
  const std::size_t slots = std::max<std::size_t>(1, ring_bytes / bytes);
  std::vector<char> from(bytes, 1);
  std::vector<char> ring(slots * bytes, 2);
  std::size_t slot = 0;
  return bench::time_per_call([&] {
    std::memcpy(ring.data() + slot * bytes, from.data(), bytes);
    slot = (slot + 1) % slots;
  }, seconds);
}

double time_latest(const std::string& name, double seconds) {
  const WeightSubscriber subscriber(name);
  return bench::time_per_call([&] { (void)subscriber.latest(); }, seconds);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    double per_call = 0;
    if (args.size() == 4 && args[0] == "sample") {
      per_call = time_sample(args[1], std::stoll(args[2]), std::stod(args[3]));
    } else if (args.size() == 4 && args[0] == "extend") {
      per_call = time_extend(args[1], std::stoll(args[2]), std::stod(args[3]));
    } else if (args.size() == 4 && args[0] == "memcpy") {
      per_call = time_memcpy(std::stoull(args[1]), std::stoull(args[2]), std::stod(args[3]));
    } else if (args.size() == 3 && args[0] == "latest") {
      per_call = time_latest(args[1], std::stod(args[2]));
    } else {
      std::fprintf(stderr, "usage: bench_python_baseline sample DIR BATCH S | extend DIR ROWS S | memcpy BYTES RING S | "
                           "latest NAME S\n");
      return 2;
    }
    std::printf("%.9f\n", per_call);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_python_baseline: %s\n", error.what());
    return 1;
  }
}

// all_ops: torch.distributed's all-in-one test (seed 002) in C++ over dist_ops: the same inputs,
// the same log lines, plus the variadic-shape and object collectives. Unlike that log, every result
// is checked against the value it must have on this rank, and any mismatch makes the program exit 1.
//
//   mpiexec -n 2 all_ops [--device cpu|cuda]
#include <CLI/CLI.hpp>

#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include "tensortree/dist_context.hpp"
#include "tensortree/dist_objects.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;

namespace {

std::string wall_clock() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

// "[Rank 0][16:09:12] message", as the seed's Python logger writes it. Each line goes out in one
// write so that the lines of different ranks never interleave mid-line.
class RankLog {
 public:
  explicit RankLog(int rank) : rank_(rank) {}

  void info(const std::string& message) const { write(stdout, message); }
  void error(const std::string& message) const { write(stderr, message); }

 private:
  void write(std::FILE* stream, const std::string& message) const {
    const std::string line = "[Rank " + std::to_string(rank_) + "][" + wall_clock() + "] " + message + "\n";
    std::fputs(line.c_str(), stream);
    std::fflush(stream);
  }

  int rank_;
};

// The seed's {'rank': r, 'time': 'hh:mm:ss'}: a user struct moved by Boost.Serialization.
struct RankStamp {
  int rank = -1;
  std::string time;

  template <class Archive>
  void serialize(Archive& archive, unsigned /*version*/) {
    archive & rank & time;
  }
  friend bool operator==(const RankStamp&, const RankStamp&) = default;
};

// The seed's scatter_object payload {'src': i, 'data': 'data_i'}.
struct ScatterItem {
  int src = -1;
  std::string data;

  template <class Archive>
  void serialize(Archive& archive, unsigned /*version*/) {
    archive & src & data;
  }
  friend bool operator==(const ScatterItem&, const ScatterItem&) = default;
};

// ---- printing as Python prints these values --------------------------------------------------
std::string repr(const Tensor& tensor) { return tensor.to(Device::cpu()).str(); }
std::string repr(const RankStamp& stamp) {
  return "{'rank': " + std::to_string(stamp.rank) + ", 'time': '" + stamp.time + "'}";
}
std::string repr(const ScatterItem& item) {
  return "{'src': " + std::to_string(item.src) + ", 'data': '" + item.data + "'}";
}
template <class T>
std::string repr(const std::vector<T>& items) {
  std::string text = "[";
  for (std::size_t i = 0; i < items.size(); ++i) text += (i ? ", " : "") + repr(items[i]);
  return text + "]";
}

// ---- equality of results with what they must be ------------------------------------------------
bool same(const Tensor& actual, const Tensor& expected) {
  return actual.defined() && actual.to(Device::cpu()).equal(expected.to(Device::cpu()));
}
bool same(const RankStamp& actual, const RankStamp& expected) { return actual == expected; }
bool same(const ScatterItem& actual, const ScatterItem& expected) { return actual == expected; }
template <class T>
bool same(const std::vector<T>& actual, const std::vector<T>& expected) {
  if (actual.size() != expected.size()) return false;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (!same(actual[i], expected[i])) return false;
  }
  return true;
}

// Logs each result the way the seed does and counts the ones that differ from what they must be.
class Checker {
 public:
  explicit Checker(const RankLog& log) : log_(log) {}

  template <class T>
  void operator()(const std::string& label, const T& actual, const T& expected) {
    log_.info(label + ": " + repr(actual));
    if (same(actual, expected)) return;
    ++failures_;
    log_.error("MISMATCH in " + label + ": expected " + repr(expected));
  }

  int failures() const { return failures_; }

 private:
  const RankLog& log_;
  int failures_ = 0;
};

// Everything the steps share: where they run and how they report.
struct Demo {
  const Group& world;
  Device device;
  int rank;
  int size;
  const RankLog& log;
  Checker& check;

  TensorOptions floats() const { return {DType::Float32, device}; }
  // start, start+step, ... (n values): the seed's torch.tensor([...]) literals are all of this form.
  Tensor arange(std::int64_t n, double start, double step = 1) const {
    return Tensor::arange({n}, start, step, floats());
  }
  Tensor full(std::int64_t n, double value) const { return Tensor::full({n}, value, floats()); }
  std::vector<Tensor> copies(const Tensor& tensor) const { return std::vector<Tensor>(static_cast<std::size_t>(size), tensor); }
};

// Another rank's stamp as far as this rank can know it: the rank it names, and a time of the form
// hh:mm:ss (that rank's clock is not known here).
RankStamp stamp_expected_from(int rank, const RankStamp& received) {
  const bool looks_like_time = received.time.size() == 8 && received.time[2] == ':' && received.time[5] == ':';
  return {rank, looks_like_time ? received.time : "hh:mm:ss"};
}

// ---- the seed's operations, in its order ---------------------------------------------------------
// Returns the seed's base_tensor, [1, 2, 3] on every rank after the broadcast.
Tensor demo_broadcast(const Demo& demo) {
  const Tensor base = demo.arange(3, demo.rank + 1.0);
  dist::broadcast(base, 0, demo.world);
  demo.check("Broadcast result", base, demo.arange(3, 1));
  return base;
}

// Returns rank 0's stamp as every rank received it.
RankStamp demo_broadcast_objects(const Demo& demo, const RankStamp& mine) {
  std::vector<RankStamp> objects;
  if (demo.rank == 0) objects.push_back(mine);
  dist::broadcast_object(objects, 0, demo.world);
  const RankStamp received = objects.empty() ? RankStamp{} : objects.front();
  demo.check("Broadcast objects", objects,
             std::vector<RankStamp>{demo.rank == 0 ? mine : stamp_expected_from(0, received)});
  return received;
}

// base becomes size * [1, 2, 3] and stays so for every later step.
Tensor expected_base(const Demo& demo) { return demo.arange(3, demo.size, demo.size); }

void demo_reductions(const Demo& demo, const Tensor& base) {
  dist::all_reduce(base, demo.world, ReduceOp::Sum);
  demo.check("All_reduce SUM", base, expected_base(demo));
  dist::reduce(base, 0, demo.world, ReduceOp::Max);
  if (demo.rank == 0) demo.check("Reduce MAX result", base, expected_base(demo));
}

void demo_gathers(const Demo& demo, const Tensor& base) {
  const std::vector<Tensor> every_base = demo.copies(expected_base(demo));
  demo.check("All_gather results", dist::all_gather(base, demo.world), every_base);
  demo.check("All_gather_into_tensor", dist::all_gather_into_tensor(base, demo.world), Tensor::cat(every_base));
  const std::vector<Tensor> gathered = dist::gather(base, 0, demo.world);
  if (demo.rank == 0) demo.check("Gather results", gathered, every_base);
}

void demo_object_gathers(const Demo& demo, const RankStamp& mine, const RankStamp& root_stamp) {
  const std::vector<RankStamp> everyone = dist::all_gather_object(mine, demo.world);
  std::vector<RankStamp> expected;
  for (int r = 0; r < demo.size; ++r) {
    const RankStamp received = r < static_cast<int>(everyone.size()) ? everyone[static_cast<std::size_t>(r)] : RankStamp{};
    expected.push_back(r == demo.rank ? mine : r == 0 ? root_stamp : stamp_expected_from(r, received));
  }
  demo.check("All_gather_object", everyone, expected);
  const std::vector<RankStamp> at_root = dist::gather_object(mine, 0, demo.world);
  if (demo.rank == 0) demo.check("Gather_object results", at_root, expected);
}

void demo_scatters(const Demo& demo) {
  std::vector<Tensor> pieces;
  std::vector<ScatterItem> items;
  if (demo.rank == 0) {
    for (int r = 0; r < demo.size; ++r) {
      pieces.push_back(demo.arange(3, r));
      items.push_back({r, "data_" + std::to_string(r)});
    }
  }
  demo.check("Scatter received", dist::scatter(pieces, 0, demo.world), demo.arange(3, demo.rank));
  demo.check("Scatter_object received", dist::scatter_object<ScatterItem>(items, 0, demo.world),
             ScatterItem{demo.rank, "data_" + std::to_string(demo.rank)});
}

// The seed passed a one-tensor list to a group of two, so its rank 1 printed uninitialised memory:
// here every rank passes one tensor per rank, and each result is the sum of the ranks.
void demo_reduce_scatter_list(const Demo& demo) {
  const std::vector<Tensor> inputs = demo.copies(demo.full(3, demo.rank));
  const double sum_of_ranks = demo.size * (demo.size - 1) / 2.0;
  demo.check("Reduce_scatter result", dist::reduce_scatter(inputs, demo.world, ReduceOp::Sum),
             demo.full(3, sum_of_ranks));
}

// The seed's input is rank * ones on every rank, so the PRODUCT holds rank 0's factor 0: its zeros
// were right. The SUM that follows gives every block distinct non-zero values, so a result that
// came from the wrong block (or was never written) cannot pass.
void demo_reduce_scatter_tensor(const Demo& demo) {
  const std::vector<Tensor> blocks = demo.copies(demo.full(3, demo.rank));
  double product_of_ranks = 1;
  for (int r = 0; r < demo.size; ++r) product_of_ranks *= r;
  demo.check("Reduce_scatter_tensor result",
             dist::reduce_scatter_tensor(Tensor::cat(blocks), demo.world, ReduceOp::Product),
             demo.full(3, product_of_ranks));

  // Element i of rank r's input is i + 1 + 10 r; block b of the sum is size * (3b + 1 + k) + 10 * sum of ranks.
  const Tensor input = demo.arange(3 * demo.size, 1 + 10.0 * demo.rank);
  const double first = demo.size * (3.0 * demo.rank + 1) + 5.0 * demo.size * (demo.size - 1);
  demo.check("Reduce_scatter_tensor SUM result", dist::reduce_scatter_tensor(input, demo.world, ReduceOp::Sum),
             demo.arange(3, first, demo.size));
}

void demo_all_to_all(const Demo& demo) {
  const Tensor input = demo.arange(3 * demo.size, 0);
  demo.check("All_to_all_single output", dist::all_to_all_single(input, demo.world),
             Tensor::cat(demo.copies(demo.arange(3, 3.0 * demo.rank))));

  std::vector<Tensor> inputs, expected;
  for (int r = 0; r < demo.size; ++r) {
    inputs.push_back(demo.full(1, demo.rank * 10.0 + r));
    expected.push_back(demo.full(1, r * 10.0 + demo.rank));
  }
  demo.check("All_to_all output", dist::all_to_all(inputs, demo.world), expected);
}

void demo_barrier_and_async(const Demo& demo, const Tensor& base) {
  dist::barrier(demo.world);
  demo.log.info("Barrier passed");
  const Tensor async_tensor = base.clone();
  const WorkPtr work = dist::all_reduce_async(async_tensor, demo.world, ReduceOp::Min);
  work->wait();
  demo.check("Async op result", async_tensor, expected_base(demo));
}

// ---- beyond the seed: variadic shapes and point-to-point objects ---------------------------------
// Each rank's own ndim, length and dtype: float32 [r + 2] on even ranks, int64 [1, r + 2] on odd
// ones, counting up from 10 r + 1.
Tensor variadic_contribution(int rank, Device device) {
  const std::int64_t n = rank + 2;
  const double start = 10.0 * rank + 1;
  if (rank % 2 == 0) return Tensor::arange({n}, start, 1, {DType::Float32, device});
  return Tensor::arange({1, n}, start, 1, {DType::Int64, device});
}

void demo_variadic(const Demo& demo) {
  std::vector<Tensor> everyone;
  for (int r = 0; r < demo.size; ++r) everyone.push_back(variadic_contribution(r, demo.device));
  const Tensor mine = variadic_contribution(demo.rank, demo.device);
  demo.check("All_gather_variadic_shape", dist::all_gather_variadic_shape(mine, demo.world), everyone);

  // The last rank gathers, so that a root other than 0 is exercised too.
  const int root = demo.size - 1;
  const std::vector<Tensor> gathered = dist::gather_variadic_shape(mine, root, demo.world);
  if (demo.rank == root) demo.check("Gather_variadic_shape results", gathered, everyone);
}

void demo_send_recv_object(const Demo& demo, const RankStamp& mine, const RankStamp& root_stamp) {
  const int last = demo.size - 1;
  if (last == 0) return;
  if (demo.rank == 0) dist::send_object(mine, last, demo.world);
  if (demo.rank == last) demo.check("Recv_object from rank 0", dist::recv_object<RankStamp>(0, demo.world), root_stamp);
}

// Every step in the seed's order; returns how many results were wrong on this rank.
int run_all_ops(const DistributedContext& context, Device device, const RankLog& log) {
  Checker check(log);
  const Demo demo{context.world(), device, context.rank(), context.size(), log, check};
  log.info("Initialized with backend: " + std::string(demo.world.collectives(device).name()) +
           ", device: " + device.str());
  const RankStamp mine{demo.rank, wall_clock()};

  const Tensor base = demo_broadcast(demo);
  const RankStamp root_stamp = demo_broadcast_objects(demo, mine);
  demo_reductions(demo, base);
  demo_gathers(demo, base);
  demo_object_gathers(demo, mine, root_stamp);
  demo_scatters(demo);
  demo_reduce_scatter_list(demo);
  demo_reduce_scatter_tensor(demo);
  demo_all_to_all(demo);
  demo_barrier_and_async(demo, base);
  demo_variadic(demo);
  demo_send_recv_object(demo, mine, root_stamp);
  return check.failures();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Every dist_ops operation of torch.distributed's all-in-one test, checked; run under mpiexec"};
  std::string device_name = "cpu";
  app.add_option("--device", device_name, "where the tensors live")->check(CLI::IsMember({"cpu", "cuda"}));
  CLI11_PARSE(app, argc, argv);

  int rank = -1;
  int failures = 0;
  {
    DistributedContext context(&argc, &argv);
    rank = context.rank();
    const RankLog log(rank);
    // The context binds each rank to its own GPU; "cuda" means that one.
    const Device device = device_name == "cuda" ? context.device() : Device::cpu();
    if (device_name == "cuda" && !device.is_cuda()) {
      log.error("no CUDA device: nothing to run on cuda");
      return 77;
    }
    try {
      failures = run_all_ops(context, device, log);
      if (failures > 0) log.error(std::to_string(failures) + " result(s) differ from the expected values");
      // The verdict of the whole job, on the first rank: every rank's count of wrong results.
      const Tensor wrong = Tensor::full({1}, failures, {DType::Int64});
      dist::all_reduce(wrong, context.world(), ReduceOp::Sum);
      const auto total = wrong.data<std::int64_t>()[0];
      if (rank == 0) {
        log.info(total == 0 ? "all_ops: every result on every rank was as expected"
                            : "all_ops: " + std::to_string(total) + " result(s) differ across the ranks");
      }
    } catch (const std::exception& error) {
      log.error(std::string("Process failed: ") + error.what());
      // Leaving without finalizing MPI makes mpiexec end the other ranks, which may be waiting
      // in a collective this rank will never join.
      std::exit(EXIT_FAILURE);
    }
  }
  const RankLog log(rank);
  log.info("Process group destroyed");
  return failures == 0 ? 0 : 1;
}

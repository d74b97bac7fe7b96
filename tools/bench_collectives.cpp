// bench_collectives: the bandwidth of one dist_ops operation over a range of sizes, in the style of
// nccl-tests: sizes from -b to -e by a factor -f, -w untimed and -n timed calls per size, and with
// -c 1 one more call whose every element is checked (#wrong). algbw is bytes / time; busbw scales it
// by nccl-tests' factor for the operation (2(n-1)/n for all_reduce, (n-1)/n for all_gather,
// reduce_scatter and all_to_all, 1 otherwise), the rate each link sustains, comparable across ops
// and rank counts. Times are the mean over ranks of one call through dist_ops, output allocation
// included where the operation allocates. Exits 1 when any element was wrong.
//
// --staged-vs-host (with --device cuda): every size runs twice in the same run, on CUDA buffers
// through staging (pinned host memory over MPI, forced with GroupOptions::cuda_transport) and on
// host buffers over MPI; the column "vs host" is the host row's time over the staged row's (1.0:
// staging keeps up with host-memory MPI).
//
//   mpiexec -n 2 bench_collectives --op all_reduce -b 8 -e 128M -f 2
//   mpiexec -n 2 bench_collectives --device cuda --staged-vs-host -b 1K -e 64M -f 4
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_table.hpp"
#include "mpi_program.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;

namespace {

enum class Op { AllReduce, AllGather, Broadcast, Reduce, ReduceScatter, AllToAll, SendRecv };

const std::map<std::string, Op> kOps = {
    {"all_reduce", Op::AllReduce}, {"all_gather", Op::AllGather},         {"broadcast", Op::Broadcast},
    {"reduce", Op::Reduce},        {"reduce_scatter", Op::ReduceScatter}, {"all_to_all", Op::AllToAll},
    {"send_recv", Op::SendRecv},
};

const std::map<std::string, ReduceOp> kRedops = {
    {"sum", ReduceOp::Sum},         {"prod", ReduceOp::Product},   {"min", ReduceOp::Min},
    {"max", ReduceOp::Max},         {"avg", ReduceOp::Avg},        {"band", ReduceOp::BitwiseAnd},
    {"bor", ReduceOp::BitwiseOr},   {"bxor", ReduceOp::BitwiseXor},
};

struct Options {
  std::int64_t min_bytes = 8;
  std::int64_t max_bytes = 8 << 20;
  double factor = 2;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  std::string op = "all_reduce";
  std::string dtype = "float32";
  std::string redop = "sum";
  int root = 0;
  std::string device = "cpu";
  bool staged_vs_host = false;
  bool csv = false;
};

bool reduces(Op op) { return op == Op::AllReduce || op == Op::Reduce || op == Op::ReduceScatter; }
bool rooted(Op op) { return op == Op::Broadcast || op == Op::Reduce; }
// The count is split into one block per rank.
bool splits(Op op) { return op == Op::AllGather || op == Op::ReduceScatter || op == Op::AllToAll; }

double bus_factor(Op op, int ranks) {
  const double n = ranks;
  switch (op) {
    case Op::AllReduce: return 2 * (n - 1) / n;
    case Op::AllGather:
    case Op::ReduceScatter:
    case Op::AllToAll: return (n - 1) / n;
    case Op::Broadcast:
    case Op::Reduce:
    case Op::SendRecv: return 1;
  }
  return 1;
}

// One run of the benchmark: the operation and where it runs.
struct Bench {
  const Group& group;
  int rank;
  int ranks;
  Op op;
  DType dtype;
  ReduceOp redop;
  int root;
  Device device;
};

// ---- data: whole numbers that every dtype holds exactly and whose reductions stay exact ---------
// The largest M such that every integer 0..M is exact in `dtype`.
std::int64_t exact_integer_limit(DType dtype) {
  switch (dtype) {
    case DType::Bool: return 1;
    case DType::Int8: return 127;
    case DType::UInt8: return 255;
    case DType::Int16: return 32767;
    case DType::UInt16: return 65535;
    case DType::Float16: return 2048;
    case DType::BFloat16: return 256;
    case DType::Float8_e4m3fn: return 16;
    case DType::Float8_e5m2: return 8;
    case DType::Float32:
    case DType::Complex64: return std::int64_t{1} << 24;
    default: return std::int64_t{1} << 31;  // wider integers and doubles: beyond any period used here
  }
}

std::int64_t largest_prime_at_most(std::int64_t n) {
  const auto is_prime = [](std::int64_t k) {
    for (std::int64_t d = 2; d * d <= k; ++d) {
      if (k % d == 0) return false;
    }
    return k >= 2;
  };
  for (std::int64_t k = n; k >= 2; --k) {
    if (is_prime(k)) return k;
  }
  return 1;
}

// Rank r's input element i has phase (i + r) mod period: the value 1 + phase, or for products 2 at
// phase 0 and 1 elsewhere (a product is at most 2^ceil(ranks / 5)). The period is a prime, so that it
// divides no power-of-two block and a block from the wrong rank or place shows in #wrong, and as
// large as the dtype allows: values (sums of `ranks` values, for SUM and AVG; twice them, for the
// bitwise ops) stay exact.
struct Pattern {
  std::int64_t period;
  bool twos;
};

Pattern pattern_for(const Bench& bench) {
  constexpr std::int64_t kLongestPeriod = 65521;
  const std::int64_t limit = exact_integer_limit(bench.dtype);
  if (!reduces(bench.op)) return {largest_prime_at_most(std::min(limit, kLongestPeriod)), false};
  switch (bench.redop) {
    case ReduceOp::Product: return {5, true};
    case ReduceOp::Sum:
    case ReduceOp::Avg: return {largest_prime_at_most(std::min(limit / bench.ranks, kLongestPeriod)), false};
    case ReduceOp::BitwiseAnd:
    case ReduceOp::BitwiseOr:
    case ReduceOp::BitwiseXor: return {largest_prime_at_most(std::min(limit / 2, kLongestPeriod)), false};
    case ReduceOp::Min:
    case ReduceOp::Max: break;
  }
  return {largest_prime_at_most(std::min(limit, kLongestPeriod)), false};
}

double input_value(const Pattern& pattern, std::int64_t rank, std::int64_t index) {
  const std::int64_t phase = (index + rank) % pattern.period;
  if (pattern.twos) return phase == 0 ? 2 : 1;
  return 1 + static_cast<double>(phase);
}

template <class T>
T to_element(double value) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<T>(value);
  } else if constexpr (std::is_constructible_v<T, double, double>) {
    return T(value, 0);  // std::complex
  } else {
    return T(static_cast<float>(value));  // the 16- and 8-bit floats
  }
}

template <class T>
double from_element(T element) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<double>(element);
  } else if constexpr (std::is_constructible_v<T, double, double>) {
    return element.real();
  } else {
    return static_cast<float>(element);
  }
}

// `value` as the dtype stores it (rounded, truncated, or 0/1 for bool), back as a double.
double stored_as(DType dtype, double value) {
  return visit_dtype(dtype, [&](auto tag) { return from_element(to_element<decltype(tag)>(value)); });
}

Tensor make_input(const Bench& bench, std::int64_t count) {
  const Tensor host = Tensor::empty({count}, {bench.dtype});
  const Pattern pattern = pattern_for(bench);
  visit_dtype(bench.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> period;
    for (std::int64_t k = 0; k < pattern.period; ++k) period.push_back(to_element<T>(input_value(pattern, bench.rank, k)));
    T* data = host.data<T>();
    for (std::int64_t i = 0; i < count; ++i) data[i] = period[static_cast<std::size_t>(i % pattern.period)];
  });
  return host.to(bench.device);
}

// ---- what each element of this rank's output must be ---------------------------------------------
double combine(ReduceOp op, double a, double b) {
  const auto bits = [](double x) { return static_cast<std::int64_t>(x); };
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return a + b;
    case ReduceOp::Product: return a * b;
    case ReduceOp::Min: return std::min(a, b);
    case ReduceOp::Max: return std::max(a, b);
    case ReduceOp::BitwiseAnd: return static_cast<double>(bits(a) & bits(b));
    case ReduceOp::BitwiseOr: return static_cast<double>(bits(a) | bits(b));
    case ReduceOp::BitwiseXor: return static_cast<double>(bits(a) ^ bits(b));
  }
  return a;
}

// Element `index` reduced over every rank's input, as the dtype stores it (bool inputs are all true).
double reduced(const Bench& bench, std::int64_t index) {
  const Pattern pattern = pattern_for(bench);
  const auto input = [&](int rank) { return stored_as(bench.dtype, input_value(pattern, rank, index)); };
  double value = input(0);
  for (int r = 1; r < bench.ranks; ++r) value = combine(bench.redop, value, input(r));
  if (bench.redop != ReduceOp::Avg) return value;
  const double mean = value / bench.ranks;
  return is_floating_point(bench.dtype) || is_complex(bench.dtype) ? mean : std::floor(mean);
}

// `count` is the operation's element count as the table shows it; `index` is into this rank's output.
double expected_value(const Bench& bench, std::int64_t count, std::int64_t index) {
  const Pattern pattern = pattern_for(bench);
  const std::int64_t block = count / bench.ranks;
  switch (bench.op) {
    case Op::AllReduce: return reduced(bench, index);
    case Op::Reduce: return bench.rank == bench.root ? reduced(bench, index) : input_value(pattern, bench.rank, index);
    case Op::Broadcast: return input_value(pattern, bench.root, index);
    case Op::AllGather: return input_value(pattern, index / block, index % block);
    case Op::ReduceScatter: return reduced(bench, bench.rank * block + index);
    case Op::AllToAll: return input_value(pattern, index / block, bench.rank * block + index % block);
    case Op::SendRecv: return input_value(pattern, (bench.rank + bench.ranks - 1) % bench.ranks, index);
  }
  return 0;
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float16: return 1e-3;
    case DType::BFloat16: return 8e-3;
    case DType::Float8_e4m3fn: return 0.125;
    case DType::Float8_e5m2: return 0.25;
    case DType::Float32:
    case DType::Complex64: return 1e-6;
    case DType::Float64:
    case DType::Complex128: return 1e-12;
    default: return 0;  // integers and bool: exact
  }
}

std::int64_t output_count(const Bench& bench, std::int64_t count) {
  return bench.op == Op::ReduceScatter ? count / bench.ranks : count;
}

std::int64_t count_wrong(const Bench& bench, const Tensor& output, std::int64_t count) {
  const std::int64_t expected_numel = output_count(bench, count);
  if (!output.defined() || output.numel() != expected_numel) return expected_numel;
  const Tensor host = output.to(Device::cpu()).contiguous();
  const double tol = tolerance(bench.dtype);
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < expected_numel; ++i) {
    const double want = stored_as(bench.dtype, expected_value(bench, count, i));
    const double got = host.value_at_linear(i).real();
    if (!(std::abs(got - want) <= tol * std::max(1.0, std::abs(want)))) ++wrong;
  }
  return wrong;
}

// ---- running the operation -------------------------------------------------------------------------
struct Buffers {
  Tensor input;
  Tensor output;  // the input itself for the in-place operations
};

Buffers prepare(const Bench& bench, std::int64_t count) {
  const std::int64_t input_count = bench.op == Op::AllGather ? count / bench.ranks : count;
  Buffers buffers{make_input(bench, input_count), {}};
  buffers.output = bench.op == Op::SendRecv ? Tensor::zeros({count}, {bench.dtype, bench.device}) : buffers.input;
  return buffers;
}

// nccl-tests' sendrecv: every rank sends to the next and receives from the previous, at once.
void exchange_with_neighbours(const Bench& bench, const Buffers& buffers) {
  const int next = (bench.rank + 1) % bench.ranks;
  const int previous = (bench.rank + bench.ranks - 1) % bench.ranks;
  const P2POp ops[] = {{P2POp::Kind::Send, buffers.input, next, 0}, {P2POp::Kind::Recv, buffers.output, previous, 0}};
  dist::batch_isend_irecv(ops, bench.group)->wait();
}

void run_once(const Bench& bench, Buffers& buffers) {
  switch (bench.op) {
    case Op::AllReduce: dist::all_reduce(buffers.input, bench.group, bench.redop); return;
    case Op::Broadcast: dist::broadcast(buffers.input, bench.root, bench.group); return;
    case Op::Reduce: dist::reduce(buffers.input, bench.root, bench.group, bench.redop); return;
    case Op::AllGather: buffers.output = dist::all_gather_into_tensor(buffers.input, bench.group); return;
    case Op::ReduceScatter:
      buffers.output = dist::reduce_scatter_tensor(buffers.input, bench.group, bench.redop);
      return;
    case Op::AllToAll: buffers.output = dist::all_to_all_single(buffers.input, bench.group); return;
    case Op::SendRecv: exchange_with_neighbours(bench, buffers); return;
  }
}

// Mean seconds per call on this rank, then averaged over the ranks as nccl-tests does.
double seconds_per_call(const Bench& bench, Buffers& buffers, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) run_once(bench, buffers);
  dist::barrier(bench.group);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run_once(bench, buffers);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
  const Tensor mean = Tensor::full({1}, seconds, {DType::Float64});
  dist::all_reduce(mean, bench.group, ReduceOp::Avg);
  return mean.at<double>({0});
}

// #wrong summed over the ranks, from fresh inputs (the timed calls may have changed them).
std::int64_t wrong_everywhere(const Bench& bench, std::int64_t count) {
  Buffers buffers = prepare(bench, count);
  run_once(bench, buffers);
  const Tensor wrong = Tensor::full({1}, static_cast<double>(count_wrong(bench, buffers.output, count)),
                                    {DType::Int64});
  dist::all_reduce(wrong, bench.group, ReduceOp::Sum);
  return wrong.at<std::int64_t>({0});
}

struct Totals {
  std::int64_t wrong = 0;
  double busbw_sum = 0;
  int sizes = 0;
};

struct Measured {
  double seconds = 0;
  std::int64_t wrong = 0;
};

Measured measure(const Bench& bench, const Options& options, std::int64_t count) {
  Buffers buffers = prepare(bench, count);
  const double seconds = seconds_per_call(bench, buffers, options.warmup, options.iters);
  return {seconds, options.check ? wrong_everywhere(bench, count) : 0};
}

// The row of one measurement, nccl-tests' columns; counted into `totals`.
std::vector<std::string> row_of(const Bench& bench, const Options& options, std::int64_t count, const Measured& measured,
                                Totals& totals) {
  const auto bytes = static_cast<double>(count) * static_cast<double>(itemsize(bench.dtype));
  const double algbw = bytes / measured.seconds / 1e9;
  const double busbw = algbw * bus_factor(bench.op, bench.ranks);
  totals.wrong += measured.wrong;
  totals.busbw_sum += busbw;
  ++totals.sizes;
  return {std::to_string(static_cast<std::int64_t>(bytes)), std::to_string(count),
          std::string(dtype_name(bench.dtype)), reduces(bench.op) ? options.redop : "none",
          std::to_string(rooted(bench.op) ? bench.root : -1), bench::fixed(measured.seconds * 1e6, 2),
          bench::fixed(algbw, 3), bench::fixed(busbw, 3), options.check ? std::to_string(measured.wrong) : "N/A"};
}

void run_size(const Bench& bench, const Options& options, std::int64_t count, bench::Table& table, Totals& totals) {
  table.add(row_of(bench, options, count, measure(bench, options, count), totals));
}

// The same size on CUDA buffers through staging, then on host buffers: two rows.
void run_size_staged_vs_host(const Bench& staged, const Bench& host, const Options& options, std::int64_t count,
                             bench::Table& table, Totals& totals) {
  const Measured on_staging = measure(staged, options, count);
  const Measured on_host = measure(host, options, count);
  std::vector<std::string> staged_row = row_of(staged, options, count, on_staging, totals);
  staged_row.insert(staged_row.end(), {"cuda staged", bench::fixed(on_host.seconds / on_staging.seconds, 2)});
  std::vector<std::string> host_row = row_of(host, options, count, on_host, totals);
  host_row.insert(host_row.end(), {"host", "1.00"});
  table.add(std::move(staged_row));
  table.add(std::move(host_row));
}

// Element count for `bytes`, rounded down to whole blocks where the operation splits per rank.
std::int64_t count_for(const Bench& bench, std::int64_t bytes) {
  const std::int64_t count = bytes / static_cast<std::int64_t>(itemsize(bench.dtype));
  return splits(bench.op) ? count - count % bench.ranks : count;
}

std::int64_t next_size(std::int64_t bytes, double factor) {
  return std::max(bytes + 1, static_cast<std::int64_t>(std::llround(static_cast<double>(bytes) * factor)));
}

// Every rank of the world in a group whose CUDA tensors are staged whatever the placement.
Group staged_world(const DistributedContext& context) {
  std::vector<int> everyone(static_cast<std::size_t>(context.size()));
  for (int r = 0; r < context.size(); ++r) everyone[static_cast<std::size_t>(r)] = r;
  GroupOptions options;
  options.cuda_transport = CudaTransport::Staged;
  return context.new_group(std::move(everyone), options);
}

// Returns #wrong over every size and rank.
std::int64_t run_benchmark(const DistributedContext& context, const Options& options, Device device) {
  const Group staged_group = options.staged_vs_host ? staged_world(context) : Group();
  const Bench bench{options.staged_vs_host ? staged_group : context.world(),
                    context.rank(),
                    context.size(),
                    kOps.at(options.op),
                    parse_dtype(options.dtype),
                    kRedops.at(options.redop),
                    options.root,
                    device};
  const Bench on_host{context.world(), bench.rank, bench.ranks, bench.op, bench.dtype, bench.redop, bench.root,
                      Device::cpu()};
  std::vector<std::string> columns{"size",     "count",       "type",        "redop", "root",
                                   "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong"};
  if (options.staged_vs_host) columns.insert(columns.end(), {"memory", "vs host"});
  bench::Table table(std::move(columns), options.csv);
  Totals totals;
  for (std::int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes = next_size(bytes, options.factor)) {
    const std::int64_t count = count_for(bench, bytes);
    if (count <= 0) continue;
    if (options.staged_vs_host) {
      run_size_staged_vs_host(bench, on_host, options, count, table, totals);
    } else {
      run_size(bench, options, count, table, totals);
    }
  }
  if (bench.rank != 0) return totals.wrong;
  if (!options.csv) {
    std::printf("# bench_collectives %s: %d ranks, backend %s, device %s, warmup %d, iters %d, check %d\n",
                options.op.c_str(), bench.ranks, std::string(bench.group.collectives(device).name()).c_str(),
                device.str().c_str(), options.warmup, options.iters, options.check);
    if (options.staged_vs_host) {
      const std::string host_name(on_host.group.collectives(Device::cpu()).name());
      std::printf("# host rows: backend %s, device cpu\n", host_name.c_str());
    }
  }
  table.print();
  if (!options.csv) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(totals.wrong),
                totals.wrong == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %.3f\n", totals.sizes ? totals.busbw_sum / totals.sizes : 0.0);
  }
  return totals.wrong;
}

void add_flags(CLI::App& app, Options& options) {
  const auto size = CLI::AsSizeValue(false);  // 1K = 1024, as nccl-tests reads sizes
  app.add_option("-b,--minbytes", options.min_bytes, "smallest size in bytes (8, 64K, 32M, 1G)")->transform(size);
  app.add_option("-e,--maxbytes", options.max_bytes, "largest size in bytes")->transform(size);
  app.add_option("-f,--stepfactor", options.factor, "each size is the previous one times this")
      ->check(CLI::Range(1.000001, 1e6));
  app.add_option("-n,--iters", options.iters, "timed calls per size")->check(CLI::PositiveNumber);
  app.add_option("-w,--warmup_iters", options.warmup, "untimed calls per size")->check(CLI::NonNegativeNumber);
  app.add_option("-c,--check", options.check, "check every element of one more call (0 or 1)")
      ->check(CLI::IsMember({0, 1}));
  app.add_option("--op", options.op, "the operation")->check(CLI::IsMember(kOps));
  app.add_option("--dtype", options.dtype, "element type, as PyTorch names it")->check([](const std::string& name) {
    try {
      (void)parse_dtype(name);
      return std::string();
    } catch (const Error& error) {
      return std::string(error.what());
    }
  });
  app.add_option("--redop", options.redop, "reduction of all_reduce, reduce and reduce_scatter")
      ->check(CLI::IsMember(kRedops));
  app.add_option("--root", options.root, "root rank of broadcast and reduce");
  app.add_option("--device", options.device, "where the buffers live")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--staged-vs-host", options.staged_vs_host,
               "with --device cuda: each size on CUDA buffers through staging and on host buffers, in one run");
  app.add_flag("--csv", options.csv, "print CSV instead of a table");
}

}  // namespace

int main(int argc, char** argv) {
  return mpi_program::run<Options>(
      argc, argv, "Bandwidth of one dist_ops collective over a range of sizes (nccl-tests style); run under mpiexec",
      add_flags, [](const DistributedContext& context, const Options& options) {
        if (options.staged_vs_host && options.device != "cuda") {
          mpi_program::complain("--staged-vs-host compares CUDA buffers with host ones: it needs --device cuda");
          return 2;
        }
        const auto device = mpi_program::device_named(context, options.device);
        if (!device) return 77;
        return run_benchmark(context, options, *device) == 0 ? 0 : 1;
      });
}

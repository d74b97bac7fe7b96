// bench_transfer: what moving a whole tree from rank 0 to rank 1 costs, by transfer mode, against
// raw MPI moving the same bytes.
//
// Modes (one row each per tree, the tree modes once per --transports entry):
//   consolidated   tree.send() of a tree consolidated for the group (consolidate_for: in the memory the
//                  transport sends from) into a consolidated receiver (one message)
//   pack+send      tree.send() of a tree that is not consolidated: packing into the wire buffer included
//   per-leaf       tree.send({.mode = PerLeaf}): one message per leaf (TensorDict's default)
//   raw-buffer     MPI_Send of one buffer of the tree's total bytes (the baseline)
//   raw-per-leaf   one MPI_Send per leaf, of that leaf's bytes
// Rank 0 sends N transfers back to back, rank 1 receives them and acknowledges the last one:
// us/transfer = rank 0's time from the first send to the acknowledgement, over N. N adapts to the
// size (enough transfers for --seconds, at least --min-iters) unless --iters fixes it; --warmup
// untimed transfers (each acknowledged) come first and estimate the time. Each mode is timed
// --repeats times, the modes taking turns, and the best stretch counts (on a busy machine the
// others are noise). vs_raw_buffer is the raw-buffer time over this mode's time (1 = as fast as one
// MPI_Send of the same bytes; above 1 = faster).
//
// After the timed loop, each mode makes one more transfer of values that depend on the mode and the
// transfer's number (so stale data from an earlier transfer cannot pass), and rank 1 checks every
// element (#wrong). Exits 1 when any element was wrong.
//
// This program is the one place outside src/dist that calls MPI itself, for the raw baselines only
// (on MPI_COMM_WORLD, whose ranks are the world group's ranks: DistributedContext initialises MPI).
//
// --transports mpi,shm runs the tree modes on a group whose host transport is each of those (MPI;
// the node-local shared-memory transport), in one run, against the same raw MPI rows.
//
// --device cuda: the trees live on each rank's GPU, --transports names CUDA transports (auto: NCCL,
// or CUDA IPC between ranks of one GPU; nccl; staged), and the last row is one device-to-device copy
// of the same bytes on rank 0 (d2d-copy), next to raw MPI of host memory: the baselines of CUDA IPC
// and of staging.
//
//   mpiexec -n 2 bench_transfer            tiny trees (CI)
//   mpiexec -n 2 bench_transfer --full     the trees: 100 x 640 KiB, 1000 x 4 KiB, 1000 x 256 B, 10000 x 64 B
//   mpiexec -n 2 bench_transfer --transports mpi,shm --cases 1x64MiB,100x640KiB,1000x256B
//   mpiexec -n 2 bench_transfer --device cuda --transports auto,staged --cases 100x640KiB,1000x256B
#include <mpi.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "mpi_program.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;

namespace {

constexpr int kSender = 0;
constexpr int kReceiver = 1;
constexpr int kDataTag = 11;
constexpr int kAckTag = 12;

struct Case {
  std::string name;
  std::int64_t leaves;
  std::int64_t leaf_bytes;

  std::int64_t total_bytes() const { return leaves * leaf_bytes; }
};

struct Options {
  std::vector<std::string> cases;
  std::vector<Case> trees;  // what --cases (or --full) names, parsed
  bool full = false;
  int iters = 0;  // 0: adaptive
  int warmup = 3;
  int min_iters = 0;        // 0: 20 with --full, 5 otherwise
  int repeats = 0;          // 0: 3 with --full, 1 otherwise
  double seconds = 0;       // 0: 0.3 with --full, 0.02 otherwise
  bool csv = false;
  std::vector<std::string> transports{"auto"};  // transports the tree modes run over
  std::string device = "cpu";
  std::vector<std::string> modes;  // empty: every mode; raw-buffer always runs (the baseline)
};

// A group's options with the transport --transports names for `device` (the names of
// TENSORTREE_HOST_TRANSPORT and TENSORTREE_CUDA_TRANSPORT); a CLI::ValidationError for another.
GroupOptions options_with_transport(const std::string& name, const std::string& device) {
  GroupOptions options;
  if (device == "cpu" && (name == "auto" || name == "mpi" || name == "shm")) {
    options.host_transport = name == "mpi" ? HostTransport::Mpi
                             : name == "shm" ? HostTransport::SharedMemory
                                             : HostTransport::Auto;
  } else if (device == "cuda" && (name == "auto" || name == "nccl" || name == "staged")) {
    options.cuda_transport = name == "nccl" ? CudaTransport::Nccl
                             : name == "staged" ? CudaTransport::Staged
                                                : CudaTransport::Auto;
  } else {
    throw CLI::ValidationError("--transports", "no transport '" + name + "' for " + device +
                                                   " (cpu: auto, mpi, shm; cuda: auto, nccl, staged)");
  }
  return options;
}

const std::vector<std::string> kFullCases = {"100x640KiB", "1000x4KiB", "1000x256B", "10000x64B"};
const std::vector<std::string> kSmallCases = {"10x64KiB", "100x256B"};

// ---- cases: "<leaves>x<bytes per leaf>" with B, KiB (K) or MiB (M) ---------------------------------------
Case parse_case(const std::string& text) {
  const auto bad = [&](const char* why) -> Case {
    std::string message = "--cases: '";
    message += text;
    message += "' ";
    message += why;
    message += " (expected e.g. 100x640KiB, 1000x256B)";
    throw CLI::ValidationError(message);
  };
  const std::size_t x = text.find('x');
  if (x == std::string::npos || x == 0) return bad("has no '<leaves>x'");
  std::size_t used = 0;
  std::int64_t leaves = 0;
  std::int64_t amount = 0;
  try {
    leaves = std::stoll(text.substr(0, x), &used);
    if (used != x) return bad("has a malformed leaf count");
    const std::string size = text.substr(x + 1);
    amount = std::stoll(size, &used);
    const std::string unit = size.substr(used);
    static const std::map<std::string, std::int64_t> kUnits = {
        {"", 1}, {"B", 1}, {"K", 1024}, {"KiB", 1024}, {"M", 1 << 20}, {"MiB", 1 << 20}};
    const auto it = kUnits.find(unit);
    if (it == kUnits.end()) return bad("has an unknown unit");
    amount *= it->second;
  } catch (const std::logic_error&) {
    return bad("is not a number");
  }
  if (leaves < 1 || leaves > 1000000) return bad("needs 1 to 1000000 leaves");
  if (amount < 4 || amount % 4 != 0 || amount > (std::int64_t{1} << 30)) {
    return bad("needs a leaf size that is a multiple of 4 bytes, up to 1 GiB");
  }
  if (leaves * amount > (std::int64_t{1} << 30)) return bad("holds more than 1 GiB (MPI_Send counts bytes in an int)");
  return {text, leaves, amount};
}

// ---- data: uint32 leaves whose values depend on (stamp, leaf, element) -------------------------------------
inline std::uint32_t value_of(std::uint32_t stamp, std::int64_t leaf, std::int64_t element) {
  return stamp * 0x9E3779B1u + static_cast<std::uint32_t>(leaf) * 65537u + static_cast<std::uint32_t>(element);
}

std::string leaf_path(std::int64_t leaf) {
  // Nested: 100 leaves per sub-tree.
  char text[48];
  std::snprintf(text, sizeof text, "g%04lld.l%02lld", static_cast<long long>(leaf / 100),
                static_cast<long long>(leaf % 100));
  return text;
}

TensorTree make_tree(const Case& c, Device device) {
  TensorTree tree{Shape{}};
  const std::int64_t elements = c.leaf_bytes / 4;
  for (std::int64_t leaf = 0; leaf < c.leaves; ++leaf) {
    tree.set(leaf_path(leaf), Tensor::zeros({elements}, {DType::UInt32, device}));
  }
  return tree;
}

// The leaves in index order (their paths sort as their indices do).
std::vector<Tensor> leaves_of(const TensorTree& tree, const Case& c) {
  std::vector<Tensor> leaves;
  leaves.reserve(static_cast<std::size_t>(c.leaves));
  for (std::int64_t leaf = 0; leaf < c.leaves; ++leaf) leaves.push_back(tree.get(leaf_path(leaf)));
  return leaves;
}

void fill_block(std::uint32_t* data, std::uint32_t stamp, std::int64_t leaf, std::int64_t elements) {
  for (std::int64_t e = 0; e < elements; ++e) data[e] = value_of(stamp, leaf, e);
}

std::int64_t wrong_in_block(const std::uint32_t* data, std::uint32_t stamp, std::int64_t leaf, std::int64_t elements) {
  std::int64_t wrong = 0;
  for (std::int64_t e = 0; e < elements; ++e) wrong += data[e] != value_of(stamp, leaf, e) ? 1 : 0;
  return wrong;
}

// Writes in place (through host memory for a CUDA leaf), so a consolidated tree stays consolidated.
void fill_tree(const TensorTree& tree, const Case& c, std::uint32_t stamp) {
  const std::vector<Tensor> leaves = leaves_of(tree, c);
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const bool on_host = leaves[i].device().is_cpu();
    const Tensor host = on_host ? leaves[i] : Tensor::empty(leaves[i].shape(), {DType::UInt32});
    fill_block(host.data<std::uint32_t>(), stamp, static_cast<std::int64_t>(i), host.numel());
    if (!on_host) leaves[i].copy_(host);
  }
}

std::int64_t wrong_in_tree(const TensorTree& tree, const Case& c, std::uint32_t stamp) {
  std::int64_t wrong = 0;
  const std::vector<Tensor> leaves = leaves_of(tree, c);
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const Tensor host = leaves[i].to(Device::cpu());
    wrong += wrong_in_block(host.data<std::uint32_t>(), stamp, static_cast<std::int64_t>(i), host.numel());
  }
  return wrong;
}

// The raw buffer holds the leaves one after another.
void fill_buffer(const Tensor& buffer, const Case& c, std::uint32_t stamp) {
  const std::int64_t elements = c.leaf_bytes / 4;
  for (std::int64_t leaf = 0; leaf < c.leaves; ++leaf) {
    fill_block(buffer.data<std::uint32_t>() + leaf * elements, stamp, leaf, elements);
  }
}

std::int64_t wrong_in_buffer(const Tensor& buffer, const Case& c, std::uint32_t stamp) {
  const std::int64_t elements = c.leaf_bytes / 4;
  std::int64_t wrong = 0;
  for (std::int64_t leaf = 0; leaf < c.leaves; ++leaf) {
    wrong += wrong_in_block(buffer.data<std::uint32_t>() + leaf * elements, stamp, leaf, elements);
  }
  return wrong;
}

// ---- modes ------------------------------------------------------------------------------------------------
enum class Mode { Consolidated, PackSend, PerLeaf, RawBuffer, RawPerLeaf, DeviceCopy };

// The baselines: raw MPI of host memory, or one device-to-device copy.
bool is_baseline(Mode mode) { return mode == Mode::RawBuffer || mode == Mode::RawPerLeaf || mode == Mode::DeviceCopy; }

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Consolidated: return "consolidated";
    case Mode::PackSend: return "pack+send";
    case Mode::PerLeaf: return "per-leaf";
    case Mode::RawBuffer: return "raw-buffer";
    case Mode::RawPerLeaf: return "raw-per-leaf";
    case Mode::DeviceCopy: return "d2d-copy";
  }
  return "?";
}

void mpi_check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  std::string message = what;
  message += ": ";
  message += std::string(text, static_cast<std::size_t>(length));
  throw BackendError(message);
}

// What one mode sends and receives into, on this rank.
struct Endpoint {
  Mode mode;
  const Case& c;
  const Group& world;
  int rank;
  TensorTree tree;               // tree modes (consolidated on both ends for Mode::Consolidated)
  Tensor buffer;                 // raw-buffer; d2d-copy: the source
  Tensor copy;                   // d2d-copy: the destination
  std::vector<Tensor> leaves;    // raw-per-leaf: the leaves of a tree that is not consolidated

  void fill(std::uint32_t stamp) const {
    if (mode == Mode::RawBuffer) {
      fill_buffer(buffer, c, stamp);
    } else if (mode == Mode::DeviceCopy) {
      if (!buffer.defined()) return;  // only rank 0 copies
      const Tensor host = Tensor::empty(buffer.shape(), {DType::UInt32});
      fill_buffer(host, c, stamp);
      buffer.copy_(host);
    } else {
      fill_tree(tree, c, stamp);
    }
  }

  // Rank 1's count of wrong elements (rank 0's, for the copy it made itself).
  std::int64_t wrong(std::uint32_t stamp) const {
    if (mode == Mode::RawBuffer) return wrong_in_buffer(buffer, c, stamp);
    if (mode == Mode::DeviceCopy) return copy.defined() ? wrong_in_buffer(copy.to(Device::cpu()), c, stamp) : 0;
    std::int64_t wrong = wrong_in_tree(tree, c, stamp);
    // A consolidated receiver must still be consolidated (swapped buffers, not a silent unpack).
    if (mode == Mode::Consolidated && !tree.is_consolidated()) wrong += 1;
    return wrong;
  }

  void transfer() {
    switch (mode) {
      case Mode::Consolidated:
      case Mode::PackSend:
      case Mode::PerLeaf: {
        const TransferMode how = mode == Mode::PerLeaf ? TransferMode::PerLeaf : TransferMode::Consolidated;
        if (rank == kSender) {
          tree.send(kReceiver, world, {.tag = kDataTag, .mode = how});
        } else {
          tree.recv(kSender, world, {.tag = kDataTag, .mode = how});
        }
        return;
      }
      case Mode::RawBuffer: {
        const int count = static_cast<int>(c.total_bytes());
        if (rank == kSender) {
          mpi_check(MPI_Send(buffer.data_ptr(), count, MPI_BYTE, kReceiver, kDataTag, MPI_COMM_WORLD), "MPI_Send");
        } else {
          mpi_check(MPI_Recv(buffer.data_ptr(), count, MPI_BYTE, kSender, kDataTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                    "MPI_Recv");
        }
        return;
      }
      case Mode::DeviceCopy: {
        if (rank != kSender) return;
        copy.copy_(buffer);
        // cudaMemcpy returns before a device-to-device copy ends; a copy of one element to the host
        // waits for it, as a tree transfer waits for its data.
        (void)copy.narrow(0, 0, 1).to(Device::cpu());
        return;
      }
      case Mode::RawPerLeaf: {
        const int count = static_cast<int>(c.leaf_bytes);
        for (const Tensor& leaf : leaves) {
          if (rank == kSender) {
            mpi_check(MPI_Send(leaf.data_ptr(), count, MPI_BYTE, kReceiver, kDataTag, MPI_COMM_WORLD), "MPI_Send");
          } else {
            mpi_check(MPI_Recv(leaf.data_ptr(), count, MPI_BYTE, kSender, kDataTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "MPI_Recv");
          }
        }
        return;
      }
    }
  }
};

Endpoint make_endpoint(Mode mode, const Case& c, const Group& group, int rank, Device device) {
  Endpoint end{mode, c, group, rank, {}, {}, {}, {}};
  switch (mode) {
    case Mode::Consolidated:
      // The sender's tree as a steady sender keeps it: in memory the group's transport sends from.
      end.tree = rank == kSender ? make_tree(c, device).consolidate_for(group) : make_tree(c, device).consolidate();
      break;
    case Mode::PackSend:
      // The sender's tree is not consolidated (every send packs it); the receiver's is.
      end.tree = rank == kSender ? make_tree(c, device) : make_tree(c, device).consolidate();
      break;
    case Mode::PerLeaf: end.tree = make_tree(c, device); break;
    case Mode::RawBuffer: end.buffer = Tensor::zeros({c.total_bytes() / 4}, {DType::UInt32}); break;
    case Mode::RawPerLeaf:
      end.tree = make_tree(c, Device::cpu());
      end.leaves = leaves_of(end.tree, c);
      break;
    case Mode::DeviceCopy:
      if (rank == kSender) {
        end.buffer = Tensor::zeros({c.total_bytes() / 4}, {DType::UInt32, device});
        end.copy = Tensor::zeros({c.total_bytes() / 4}, {DType::UInt32, device});
      }
      break;
  }
  return end;
}

// The acknowledgement that closes a timed stretch (the same small dist_ops message for every mode).
void acknowledge(const Group& world, int rank) {
  const Tensor token = Tensor::zeros({1}, {DType::Int32});
  if (rank == kReceiver) {
    dist::send(token, kSender, world, {.tag = kAckTag});
  } else {
    dist::recv(token, kReceiver, world, {.tag = kAckTag});
  }
}

struct Measurement {
  double seconds = 0;  // per transfer, on rank 0: the best of the repeats
  int iters = 0;
  std::int64_t wrong = 0;
};

double elapsed_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Warmup transfers, each acknowledged so that rank 0 can estimate the time of one; rank 0 then picks
// the number of timed transfers and rank 1 learns it.
int choose_iters(Endpoint& end, const Options& o, const Group& world, int rank) {
  const int warmup = std::max(o.warmup, 1);
  dist::barrier(world);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup; ++i) {
    end.transfer();
    acknowledge(world, rank);
  }
  const double estimate = elapsed_since(start) / warmup;
  const Tensor iters = Tensor::zeros({1}, {DType::Int64});
  if (rank == kSender) {
    std::int64_t n = o.iters;
    if (n <= 0) {
      const double wanted = std::ceil(o.seconds / std::max(estimate, 1e-9));
      n = static_cast<std::int64_t>(std::clamp(wanted, static_cast<double>(o.min_iters), 1e6));
    }
    iters.data<std::int64_t>()[0] = n;
  }
  dist::broadcast(iters, kSender, world);
  return static_cast<int>(iters.data<std::int64_t>()[0]);
}

// `n` transfers back to back, closed by one acknowledgement: seconds per transfer on rank 0.
double timed(Endpoint& end, int n, const Group& world, int rank) {
  dist::barrier(world);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) end.transfer();
  acknowledge(world, rank);
  return elapsed_since(start) / n;
}

// One more transfer, of values no earlier transfer held, checked element by element; every rank
// gets the count of wrong elements.
std::int64_t checked_transfer(Endpoint& end, std::uint32_t stamp, const Group& world, int rank) {
  if (rank == kSender) end.fill(stamp);
  end.transfer();
  const Tensor wrong = Tensor::zeros({1}, {DType::Int64});
  // The receiver checks a transfer; rank 0 checks the copy it made itself.
  if (rank == kReceiver || end.mode == Mode::DeviceCopy) wrong.data<std::int64_t>()[0] = end.wrong(stamp);
  dist::all_reduce(wrong, world);
  return wrong.data<std::int64_t>()[0];
}

struct Rows {
  bench::Table table;
  std::int64_t wrong = 0;
  std::vector<std::string> notes;
};

// A host transport the tree modes run over: its --transports name and a group of both ranks using it.
struct Transport {
  std::string name;
  Group group;
};

// One row of the table: a mode, over one transport (the raw modes over MPI_COMM_WORLD).
struct Variant {
  Mode mode;
  const Transport* transport;  // null for the raw modes

  std::string transport_name() const {
    if (transport) return transport->name;
    return mode == Mode::DeviceCopy ? "cuda" : "raw mpi";
  }
};

// Raw MPI of one host buffer first; then each transport's tree modes; last raw MPI per leaf (host
// trees) or one device-to-device copy (CUDA trees).
std::vector<Variant> variants_of(const std::vector<Transport>& transports, Device device,
                                 const std::vector<std::string>& modes) {
  const auto wanted = [&](Mode mode) {
    return modes.empty() || std::find(modes.begin(), modes.end(), mode_name(mode)) != modes.end();
  };
  std::vector<Variant> variants{{Mode::RawBuffer, nullptr}};
  for (const Transport& transport : transports) {
    for (Mode mode : {Mode::Consolidated, Mode::PackSend, Mode::PerLeaf}) {
      if (wanted(mode)) variants.push_back({mode, &transport});
    }
  }
  const Mode last = device.is_cpu() ? Mode::RawPerLeaf : Mode::DeviceCopy;
  if (wanted(last)) variants.push_back({last, nullptr});
  return variants;
}

void run_case(const Case& c, const Options& o, const std::vector<Transport>& transports, const Group& world,
              Device device, int rank, std::uint32_t& stamp, Rows& rows) {
  const std::vector<Variant> variants = variants_of(transports, device, o.modes);
  std::vector<Endpoint> ends;
  ends.reserve(variants.size());
  for (const Variant& variant : variants) {
    ends.push_back(make_endpoint(variant.mode, c, variant.transport ? variant.transport->group : world, rank, device));
    if (rank == kSender) ends.back().fill(stamp);
    stamp += 1000003u;
  }
  std::vector<Measurement> results(variants.size());
  for (std::size_t i = 0; i < variants.size(); ++i) results[i].iters = choose_iters(ends[i], o, world, rank);
  // The repeats go round the variants, so that a noisy moment does not fall on one of them only.
  for (int repeat = 0; repeat < std::max(o.repeats, 1); ++repeat) {
    for (std::size_t i = 0; i < variants.size(); ++i) {
      const double seconds = timed(ends[i], results[i].iters, world, rank);
      results[i].seconds = repeat == 0 ? seconds : std::min(results[i].seconds, seconds);
    }
  }
  for (std::size_t i = 0; i < variants.size(); ++i) {
    results[i].wrong = checked_transfer(ends[i], stamp, world, rank);
    stamp += 1000003u;
  }

  const double raw = results.front().seconds;
  const std::size_t last = variants.size() - 1;  // raw-per-leaf or d2d-copy, when it runs
  const double mib = static_cast<double>(c.total_bytes()) / (1 << 20);
  // Tree modes first, then the raw ones.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    if (!is_baseline(variants[i].mode)) order.push_back(i);
  }
  order.push_back(0);
  if (is_baseline(variants[last].mode) && last != 0) order.push_back(last);
  for (std::size_t i : order) {
    const Measurement& m = results[i];
    rows.wrong += m.wrong;
    rows.table.add({c.name, std::to_string(c.leaves), bench::fixed(mib, 3), variants[i].transport_name(),
                    mode_name(variants[i].mode), bench::fixed(m.seconds * 1e6, 1),
                    bench::fixed(static_cast<double>(c.total_bytes()) / m.seconds / 1e9, 3),
                    bench::fixed(raw / m.seconds, 2), std::to_string(m.iters), std::to_string(m.wrong)});
  }
  // The time of `mode` over `transport` (null: a baseline), when it ran.
  const auto seconds_of = [&](Mode mode, const Transport* transport) -> std::optional<double> {
    for (std::size_t i = 0; i < variants.size(); ++i) {
      if (variants[i].mode == mode && variants[i].transport == transport) return results[i].seconds;
    }
    return std::nullopt;
  };
  for (const Transport& transport : transports) {
    const std::optional<double> consolidated = seconds_of(Mode::Consolidated, &transport);
    if (!consolidated) continue;
    std::string note = "# " + c.name + " over " + transport.name + ": consolidated " + bench::fixed(*consolidated * 1e6, 1) +
                       " us end to end, " + bench::fixed(raw / *consolidated, 2) + "x the speed of raw-buffer";
    const auto compare = [&](std::optional<double> other, Mode mode) {
      if (other) note += ", " + bench::fixed(*other / *consolidated, 2) + "x as fast as " + mode_name(mode);
    };
    compare(seconds_of(Mode::PerLeaf, &transport), Mode::PerLeaf);
    compare(seconds_of(Mode::RawPerLeaf, nullptr), Mode::RawPerLeaf);
    compare(seconds_of(Mode::DeviceCopy, nullptr), Mode::DeviceCopy);
    rows.notes.push_back(note);
  }
}

// The defaults that depend on --full, and the trees --cases names (a CLI::ValidationError where one is
// unreadable).
void settle(Options& o) {
  if (o.min_iters <= 0) o.min_iters = o.full ? 20 : 5;
  if (o.seconds <= 0) o.seconds = o.full ? 0.3 : 0.02;
  if (o.repeats <= 0) o.repeats = o.full ? 3 : 1;
  for (const std::string& name : o.cases.empty() ? (o.full ? kFullCases : kSmallCases) : o.cases) {
    o.trees.push_back(parse_case(name));
  }
  for (const std::string& name : o.transports) options_with_transport(name, o.device);
}

void add_flags(CLI::App& app, Options& o) {
  app.add_option("--cases", o.cases,
                 "trees as <leaves>x<bytes per leaf> (B, KiB, MiB), e.g. 100x640KiB 1000x256B; "
                 "default: 10x64KiB 100x256B, or with --full 100x640KiB 1000x4KiB 1000x256B 10000x64B")
      ->delimiter(',');
  app.add_flag("--full", o.full, "the issue's trees, with longer timing");
  app.add_option("--iters", o.iters, "timed transfers per mode (default: adaptive)")->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", o.warmup, "untimed transfers per mode (at least 1 is made)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--min-iters", o.min_iters, "fewest timed transfers when adaptive (default 20 with --full, else 5)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seconds", o.seconds, "timed seconds per stretch when adaptive (default 0.3 with --full, else 0.02)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--repeats", o.repeats,
                 "timed stretches per mode, taken in turn with the other modes; the best counts "
                 "(default 3 with --full, else 1)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--csv", o.csv, "print CSV instead of a table");
  app.add_option("--transports", o.transports,
                 "transports the tree modes run over, each a set of rows: auto (the group's choice), mpi, shm; "
                 "with --device cuda auto, nccl, staged (default: auto)")
      ->delimiter(',');
  app.add_option("--device", o.device, "where the trees live")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--modes", o.modes,
                 "only these modes (consolidated, pack+send, per-leaf, raw-per-leaf, d2d-copy); raw-buffer always runs")
      ->delimiter(',')
      ->check(CLI::IsMember({"consolidated", "pack+send", "per-leaf", "raw-per-leaf", "d2d-copy"}));
  // After parsing: an unreadable case is a flag error like any other.
  app.final_callback([&o] { settle(o); });
}

void print_header(const Options& o, const Group& world, Device device) {
  std::string timing;
  if (o.iters > 0) {
    timing += "iters ";
    timing += std::to_string(o.iters);
  } else {
    timing += "adaptive: ";
    timing += bench::fixed(o.seconds, 2);
    timing += " s per stretch, at least ";
    timing += std::to_string(o.min_iters);
    timing += " transfers";
  }
  std::printf("# bench_transfer: %s trees, rank 0 -> rank 1, world's transport to rank 1: %s, warmup %d, %s, best of %d\n",
              device.str().c_str(), std::string(world.transport(kReceiver, device).name()).c_str(),
              std::max(o.warmup, 1), timing.c_str(), std::max(o.repeats, 1));
}

// Returns the exit code: 1 when any element was wrong.
int run_transfers(const DistributedContext& context, const Options& o) {
  const int rank = context.rank();
  if (context.size() != 2) {
    if (rank == 0) std::fprintf(stderr, "bench_transfer runs on exactly 2 ranks: mpiexec -n 2 bench_transfer\n");
    return 1;
  }
  Rows rows{bench::Table({"tree", "leaves", "MiB", "transport", "mode", "us/transfer", "GB/s", "vs_raw_buffer", "iters", "#wrong"},
                         o.csv),
            0,
            {}};
  const std::optional<Device> device = mpi_program::device_named(context, o.device);
  if (!device) return 77;
  std::vector<Transport> transports;
  for (const std::string& name : o.transports) {
    transports.push_back({name, context.new_group({0, 1}, options_with_transport(name, o.device))});
  }
  std::uint32_t stamp = 1;
  for (const Case& c : o.trees) run_case(c, o, transports, context.world(), *device, rank, stamp, rows);
  if (rank == kSender) {
    if (!o.csv) print_header(o, context.world(), *device);
    rows.table.print();
    if (!o.csv) {
      for (const std::string& note : rows.notes) std::printf("%s\n", note.c_str());
      std::printf("# wrong elements: %lld %s\n", static_cast<long long>(rows.wrong), rows.wrong == 0 ? "OK" : "FAILED");
    }
    std::fflush(stdout);
  }
  return rows.wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return mpi_program::run<Options>(
      argc, argv, "Tree transfer modes against raw MPI, rank 0 to rank 1; run under mpiexec -n 2", add_flags,
      run_transfers);
}

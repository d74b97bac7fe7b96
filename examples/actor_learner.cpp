// actor_learner: the main job. Rank 0 is the learner, every other rank an actor.
//
// Each actor fills trajectories, nested trees of batch_size [T, B]:
//   obs uint8 [T, B, 3, H, W]   action int64 [T, B]   reward float32 [T, B]   done bool [T, B]
//   next/obs uint8 [T, B, 3, H, W]   info/{episode_return float32, episode_len int64} [T, B]
//   meta/{actor, seq, version int64, obs_xxh3 uint64} [T, B]
// and ships them to the learner with isend (after one init_remote that teaches the learner the
// layout), keeping two trees so that it fills one while the other is in flight. The learner
// receives from whichever actor is ready (irecv from kAnySource, source_rank() names the actor),
// stacks `--batch` trajectories into a learner batch and computes statistics, and every
// `--broadcast-every` batches broadcasts a parameter tree (policy/{w, b}, version) to the actors.
//
// Every element is checked without a side channel: each value derives from (seed, actor, sequence
// number, leaf, element index), and meta/ carries the actor, sequence number and parameter version,
// so the learner recomputes what every trajectory must hold; meta/obs_xxh3 holds the actor's XXH3
// of each obs row, recomputed on arrival. The actors check every broadcast parameter. Any mismatch
// is printed (actor, seq, key, index, expected, got) and makes every rank exit 1.
//
// The protocol is deterministic: the batches are split into rounds of --broadcast-every batches;
// in a round each actor sends a share of the round's trajectories known to every rank, and after
// every round but the last, all ranks take part in the broadcast. A trajectory sent in round r
// therefore carries parameter version r (version 0 is broadcast before the first round).
//
//   mpiexec -n 3 actor_learner [--T 16 --B 8 --height 64 --width 64 --batches 200 --batch 4 --broadcast-every 5
//                              --report-every 40 --device cpu --seed 0]
#include <CLI/CLI.hpp>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tensortree/dist_context.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;

namespace {

constexpr int kLearner = 0;
constexpr int kTrajectoryTag = 1;
constexpr int kMaxPrintedMismatches = 20;

struct Options {
  std::int64_t T = 16;
  std::int64_t B = 8;
  std::int64_t height = 64;
  std::int64_t width = 64;
  int batches = 200;
  int batch = 4;
  int broadcast_every = 5;
  int report_every = 40;
  std::string device = "cpu";
  std::uint64_t seed = 0;
  std::int64_t corrupt_seq = -1;  // testing the checks: actor 1 damages this trajectory
};

// ---- output: one write per line so that the ranks' lines never interleave mid-line -------------------
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
std::string format(const char* pattern, ...) {
  char text[1024];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(text, sizeof text, pattern, args);
  va_end(args);
  return text;
}

void say(const std::string& line) {
  std::string text = line;
  text += '\n';
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

void complain(const std::string& line) {
  std::string text = line;
  text += '\n';
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ---- the protocol: who sends how much, and when --------------------------------------------------------
struct Protocol {
  int actors;
  int batches;
  int batch;
  int broadcast_every;

  int rounds() const { return (batches + broadcast_every - 1) / broadcast_every; }
  int batches_in(int round) const { return std::min(broadcast_every, batches - round * broadcast_every); }
  std::int64_t trajectories_in(int round) const { return std::int64_t{batches_in(round)} * batch; }
  // Actor ranks are 1..actors; the remainder of a round's split rotates so that no actor always
  // sends the extra trajectory.
  std::int64_t share(int round, int actor_rank) const {
    const std::int64_t total = trajectories_in(round);
    const std::int64_t index = (actor_rank - 1 + round) % actors;
    return total / actors + (index < total % actors ? 1 : 0);
  }
  // The parameters are broadcast after every round but the last.
  bool broadcast_after(int round) const { return round + 1 < rounds(); }
};

// ---- deterministic content ------------------------------------------------------------------------------
std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Who wrote a trajectory, which one it is, and the parameters it was acted with.
struct Stamp {
  std::int64_t actor;
  std::int64_t seq;
  std::int64_t version;
};

enum class Key { Obs, NextObs, Action, Reward, Done, EpisodeReturn, EpisodeLen, Actor, Seq, Version, ObsHash };

struct LeafInfo {
  Key key;
  const char* path;
};

constexpr LeafInfo kLeaves[] = {
    {Key::Obs, "obs"},
    {Key::Action, "action"},
    {Key::Reward, "reward"},
    {Key::Done, "done"},
    {Key::NextObs, "next.obs"},
    {Key::EpisodeReturn, "info.episode_return"},
    {Key::EpisodeLen, "info.episode_len"},
    {Key::Actor, "meta.actor"},
    {Key::Seq, "meta.seq"},
    {Key::Version, "meta.version"},
    {Key::ObsHash, "meta.obs_xxh3"},
};

// The per-trajectory, per-leaf base every element of that leaf derives from.
std::uint64_t base_of(std::uint64_t seed, const Stamp& stamp, Key key) {
  std::uint64_t h = splitmix(seed ^ 0x5EEDull);
  h = splitmix(h ^ static_cast<std::uint64_t>(stamp.actor));
  h = splitmix(h ^ static_cast<std::uint64_t>(stamp.seq));
  return splitmix(h ^ static_cast<std::uint64_t>(key));
}

// Element i of each generated leaf. Observations vary with i inside a row and with the base between
// trajectories; floats are multiples of 1/64 (exact, so sums are exact in double too).
inline std::uint8_t obs_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<std::uint8_t>(static_cast<std::uint8_t>((i * 7) ^ (i >> 9)) + static_cast<std::uint8_t>(base));
}
inline std::int64_t action_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<std::int64_t>((base + i) % 18);
}
inline float reward_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<float>(static_cast<std::int64_t>(((base >> 8) + i * 31) % 2001) - 1000) / 64.0f;
}
inline bool done_value(std::uint64_t base, std::uint64_t i) { return ((base >> 16) + i) % 11 == 0; }
inline float episode_return_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<float>(((base >> 24) + i * 13) % 4001) * 0.25f;
}
inline std::int64_t episode_len_value(std::uint64_t base, std::uint64_t i) {
  return static_cast<std::int64_t>(((base >> 32) + i) % 1000) + 1;
}

std::uint64_t row_hash(const std::uint8_t* row, std::size_t bytes, std::uint64_t seed) {
  return XXH3_64bits_withSeed(row, bytes, seed);
}

// ---- trajectory trees -----------------------------------------------------------------------------------
TensorTree make_trajectory(const Options& o, Device device) {
  const Shape tb{o.T, o.B};
  const Shape image{o.T, o.B, 3, o.height, o.width};
  TensorTree tree(tb);
  tree.set("obs", Tensor::zeros(image, {DType::UInt8, device}));
  tree.set("action", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("reward", Tensor::zeros(tb, {DType::Float32, device}));
  tree.set("done", Tensor::zeros(tb, {DType::Bool, device}));
  tree.set("next.obs", Tensor::zeros(image, {DType::UInt8, device}));
  tree.set("info.episode_return", Tensor::zeros(tb, {DType::Float32, device}));
  tree.set("info.episode_len", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("meta.actor", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("meta.seq", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("meta.version", Tensor::zeros(tb, {DType::Int64, device}));
  tree.set("meta.obs_xxh3", Tensor::zeros(tb, {DType::UInt64, device}));
  return tree;
}

std::size_t payload_bytes(const TensorTree& tree) {
  std::size_t bytes = 0;
  tree.for_each_leaf([&](const Path&, const Tensor& leaf) { bytes += leaf.nbytes(); });
  return bytes;
}

std::size_t obs_row_bytes(const Options& o) { return static_cast<std::size_t>(3 * o.height * o.width); }

// Writes the trajectory `stamp` names into a CPU tree's leaves, in place (keeps consolidation).
void fill(const TensorTree& tree, const Options& o, const Stamp& stamp) {
  const auto n = static_cast<std::uint64_t>(o.T * o.B);
  const auto fill_obs = [&](const char* path, Key key) {
    const std::uint64_t base = base_of(o.seed, stamp, key);
    auto* p = tree.get(path).data<std::uint8_t>();
    const auto count = static_cast<std::uint64_t>(tree.get(path).numel());
    for (std::uint64_t i = 0; i < count; ++i) p[i] = obs_value(base, i);
  };
  fill_obs("obs", Key::Obs);
  fill_obs("next.obs", Key::NextObs);
  {
    const std::uint64_t base = base_of(o.seed, stamp, Key::Action);
    auto* p = tree.get("action").data<std::int64_t>();
    for (std::uint64_t i = 0; i < n; ++i) p[i] = action_value(base, i);
  }
  {
    const std::uint64_t base = base_of(o.seed, stamp, Key::Reward);
    auto* p = tree.get("reward").data<float>();
    for (std::uint64_t i = 0; i < n; ++i) p[i] = reward_value(base, i);
  }
  {
    const std::uint64_t base = base_of(o.seed, stamp, Key::Done);
    auto* p = tree.get("done").data<bool>();
    for (std::uint64_t i = 0; i < n; ++i) p[i] = done_value(base, i);
  }
  {
    const std::uint64_t base = base_of(o.seed, stamp, Key::EpisodeReturn);
    auto* p = tree.get("info.episode_return").data<float>();
    for (std::uint64_t i = 0; i < n; ++i) p[i] = episode_return_value(base, i);
  }
  {
    const std::uint64_t base = base_of(o.seed, stamp, Key::EpisodeLen);
    auto* p = tree.get("info.episode_len").data<std::int64_t>();
    for (std::uint64_t i = 0; i < n; ++i) p[i] = episode_len_value(base, i);
  }
  std::fill_n(tree.get("meta.actor").data<std::int64_t>(), n, stamp.actor);
  std::fill_n(tree.get("meta.seq").data<std::int64_t>(), n, stamp.seq);
  std::fill_n(tree.get("meta.version").data<std::int64_t>(), n, stamp.version);
  const auto* obs = tree.get("obs").data<std::uint8_t>();
  auto* hashes = tree.get("meta.obs_xxh3").data<std::uint64_t>();
  const std::size_t row = obs_row_bytes(o);
  for (std::uint64_t r = 0; r < n; ++r) hashes[r] = row_hash(obs + r * row, row, o.seed);
}

// ---- checking a received trajectory ------------------------------------------------------------------
// Counts failed checks; prints the first few mismatches in detail.
class Verdicts {
 public:
  explicit Verdicts(std::string who) : who_(std::move(who)) {}

  void pass() { ++checks_; }
  void fail(const std::string& what) {
    ++checks_;
    ++failures_;
    if (printed_ < kMaxPrintedMismatches) {
      std::string line = "[";
      line += who_;
      line += "] MISMATCH ";
      line += what;
      complain(line);
      ++printed_;
    } else if (printed_ == kMaxPrintedMismatches) {
      std::string line = "[";
      line += who_;
      line += "] (further mismatches not printed)";
      complain(line);
      ++printed_;
    }
  }
  void expect(bool ok, const std::string& what) { ok ? pass() : fail(what); }

  std::int64_t checks() const { return checks_; }
  std::int64_t failures() const { return failures_; }

 private:
  std::string who_;
  std::int64_t checks_ = 0;
  std::int64_t failures_ = 0;
  int printed_ = 0;
};

std::string value_text(std::uint8_t v) { return std::to_string(static_cast<unsigned>(v)); }
std::string value_text(bool v) { return v ? "true" : "false"; }
std::string value_text(std::int64_t v) { return std::to_string(v); }
std::string value_text(std::uint64_t v) { return std::to_string(v); }
std::string value_text(float v) { return format("%.9g", static_cast<double>(v)); }

// Compares every element of a contiguous CPU leaf with expected(i): one check per leaf, and on a
// mismatch the first differing element and how many differ.
template <class T, class Expected>
void check_leaf(Verdicts& verdicts, const Stamp& stamp, const TensorTree& tree, const char* path, Expected expected) {
  const Tensor& leaf = tree.get(path);
  const Tensor data = leaf.contiguous();
  const T* p = data.data<T>();
  const auto count = static_cast<std::uint64_t>(data.numel());
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < count; ++i) wrong += p[i] != expected(i) ? 1 : 0;
  if (wrong == 0) {
    verdicts.pass();
    return;
  }
  std::uint64_t first = 0;
  while (first < count && p[first] == expected(first)) ++first;
  verdicts.fail(format("actor %" PRId64 " seq %" PRId64 " key %s index %" PRIu64 ": expected %s, got %s (%" PRIu64
                       " of %" PRIu64 " elements differ)",
                       stamp.actor, stamp.seq, path, first, value_text(static_cast<T>(expected(first))).c_str(),
                       value_text(p[first]).c_str(), wrong, count));
}

struct TrajectoryStats {
  double reward_sum = 0;
  std::int64_t done_count = 0;
};

// Checks every element of a CPU trajectory against what `stamp` says it must hold.
TrajectoryStats check_trajectory(Verdicts& v, const TensorTree& tree, const Options& o, const Stamp& stamp) {
  const auto b = [&](Key key) { return base_of(o.seed, stamp, key); };
  const std::uint64_t obs_base = b(Key::Obs), next_base = b(Key::NextObs), action_base = b(Key::Action),
                      reward_base = b(Key::Reward), done_base = b(Key::Done), ret_base = b(Key::EpisodeReturn),
                      len_base = b(Key::EpisodeLen);
  check_leaf<std::int64_t>(v, stamp, tree, "meta.actor", [&](std::uint64_t) { return stamp.actor; });
  check_leaf<std::int64_t>(v, stamp, tree, "meta.seq", [&](std::uint64_t) { return stamp.seq; });
  check_leaf<std::int64_t>(v, stamp, tree, "meta.version", [&](std::uint64_t) { return stamp.version; });
  check_leaf<std::uint8_t>(v, stamp, tree, "obs", [&](std::uint64_t i) { return obs_value(obs_base, i); });
  check_leaf<std::uint8_t>(v, stamp, tree, "next.obs", [&](std::uint64_t i) { return obs_value(next_base, i); });
  check_leaf<std::int64_t>(v, stamp, tree, "action", [&](std::uint64_t i) { return action_value(action_base, i); });
  check_leaf<float>(v, stamp, tree, "reward", [&](std::uint64_t i) { return reward_value(reward_base, i); });
  check_leaf<bool>(v, stamp, tree, "done", [&](std::uint64_t i) { return done_value(done_base, i); });
  check_leaf<float>(v, stamp, tree, "info.episode_return",
                    [&](std::uint64_t i) { return episode_return_value(ret_base, i); });
  check_leaf<std::int64_t>(v, stamp, tree, "info.episode_len",
                           [&](std::uint64_t i) { return episode_len_value(len_base, i); });

  // The actor's XXH3 of each obs row against the rows as they arrived.
  const Tensor obs = tree.get("obs").contiguous();
  const auto* rows = obs.data<std::uint8_t>();
  const std::size_t row = obs_row_bytes(o);
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(o.T * o.B));
  for (std::size_t r = 0; r < hashes.size(); ++r) hashes[r] = row_hash(rows + r * row, row, o.seed);
  check_leaf<std::uint64_t>(v, stamp, tree, "meta.obs_xxh3", [&](std::uint64_t r) { return hashes[r]; });

  // What the learner's statistics must come to, from the formulas rather than the data.
  TrajectoryStats stats;
  const auto n = static_cast<std::uint64_t>(o.T * o.B);
  for (std::uint64_t i = 0; i < n; ++i) {
    stats.reward_sum += static_cast<double>(reward_value(reward_base, i));
    stats.done_count += done_value(done_base, i) ? 1 : 0;
  }
  return stats;
}

// ---- parameters --------------------------------------------------------------------------------------------
constexpr std::int64_t kHidden = 64;

float w_value(std::int64_t version, std::int64_t i) {
  return static_cast<float>(version) + static_cast<float>(i % 1000) / 8.0f;
}
float b_value(std::int64_t version, std::int64_t i) {
  return -static_cast<float>(version) - static_cast<float>(i) / 4.0f;
}

TensorTree make_params(std::int64_t version, Device device) {
  Tensor w = Tensor::empty({kHidden, kHidden}, {DType::Float32});
  Tensor b = Tensor::empty({kHidden}, {DType::Float32});
  for (std::int64_t i = 0; i < kHidden * kHidden; ++i) w.data<float>()[i] = w_value(version, i);
  for (std::int64_t i = 0; i < kHidden; ++i) b.data<float>()[i] = b_value(version, i);
  TensorTree params(Shape{});
  params.set("policy.w", w.to(device));
  params.set("policy.b", b.to(device));
  params.set("version", Tensor::full({}, static_cast<double>(version), {DType::Int64}).to(device));
  return params;
}

void check_params(Verdicts& v, const TensorTree& received, std::int64_t version, int rank) {
  if (!received.contains("version") || !received.contains("policy.w") || !received.contains("policy.b")) {
    v.fail(format("rank %d: the broadcast parameter tree lacks version, policy.w or policy.b", rank));
    return;
  }
  const TensorTree params = received.to(Device::cpu());
  const Stamp stamp{rank, -1, version};
  check_leaf<std::int64_t>(v, stamp, params, "version", [&](std::uint64_t) { return version; });
  check_leaf<float>(v, stamp, params, "policy.w",
                    [&](std::uint64_t i) { return w_value(version, static_cast<std::int64_t>(i)); });
  check_leaf<float>(v, stamp, params, "policy.b",
                    [&](std::uint64_t i) { return b_value(version, static_cast<std::int64_t>(i)); });
}

// ---- the actor -----------------------------------------------------------------------------------------------
// Fills `host` (a CPU tree) and, for a CUDA run, copies it into `device_tree`. `corrupt` flips one
// obs byte after the checksums were taken, to show that the learner notices.
void produce(const TensorTree& host, const TensorTree& device_tree, const Options& o, const Stamp& stamp,
             bool corrupt) {
  fill(host, o, stamp);
  if (corrupt) {
    const Tensor& obs = host.get("obs");
    obs.data<std::uint8_t>()[obs.numel() / 2] ^= 0x5A;
  }
  if (&host == &device_tree) return;
  host.for_each_leaf([&](const Path& path, const Tensor& leaf) { device_tree.get(path).copy_(leaf); });
}

std::int64_t run_actor(const DistributedContext& context, const Options& o, const Protocol& protocol, Device device) {
  const Group& world = context.world();
  const int rank = context.rank();
  std::string who = "actor ";
  who += std::to_string(rank);
  Verdicts verdicts(who);

  // Two consolidated trees: one is filled while the other is in flight. A CUDA run fills a host
  // tree and copies it over.
  const TensorTree host = make_trajectory(o, Device::cpu()).consolidate();
  TensorTree slots[2] = {make_trajectory(o, device).consolidate(), make_trajectory(o, device).consolidate()};
  const bool on_host = device.is_cpu();
  WorkPtr in_flight[2];

  // The handshake (seq 0): the learner learns the layout and checks this first trajectory too.
  std::int64_t version = 0;
  produce(on_host ? slots[0] : host, slots[0], o, {rank, 0, version}, rank == 1 && o.corrupt_seq == 0);
  slots[0].init_remote(kLearner, world);

  TensorTree params;
  params.broadcast(kLearner, world);
  check_params(verdicts, params, version, rank);

  std::int64_t seq = 1;
  std::int64_t sent = 0;
  for (int round = 0; round < protocol.rounds(); ++round) {
    for (std::int64_t k = protocol.share(round, rank); k > 0; --k, ++seq) {
      const std::size_t slot = static_cast<std::size_t>(seq % 2);
      if (in_flight[slot]) in_flight[slot]->wait();  // the older send out of this tree
      produce(on_host ? slots[slot] : host, slots[slot], o, {rank, seq, version}, rank == 1 && o.corrupt_seq == seq);
      in_flight[slot] = slots[slot].isend(kLearner, world, {.tag = kTrajectoryTag});
      ++sent;
    }
    if (protocol.broadcast_after(round)) {
      params.broadcast(kLearner, world);
      check_params(verdicts, params, round + 1, rank);
      version = params.to(Device::cpu()).get("version").data<std::int64_t>()[0];
    }
  }
  for (WorkPtr& work : in_flight) {
    if (work) work->wait();
  }
  say(format("[actor %d] sent %" PRId64 " trajectories, saw parameter versions 0..%" PRId64 ", %" PRId64
             "/%" PRId64 " checks passed",
             rank, sent, version, verdicts.checks() - verdicts.failures(), verdicts.checks()));
  return verdicts.failures();
}

// ---- the learner ---------------------------------------------------------------------------------------------
struct Posted {
  TensorTree* tree;
  WorkPtr work;
};

class Learner {
 public:
  Learner(const DistributedContext& context, const Options& o, const Protocol& protocol, Device device)
      : world_(context.world()),
        o_(o),
        protocol_(protocol),
        device_(device),
        any_source_(context.world().backend(device).name() != "nccl"),
        verdicts_("learner"),
        per_actor_(static_cast<std::size_t>(protocol.actors) + 1, 0),
        next_seq_(static_cast<std::size_t>(protocol.actors) + 1, 1) {}

  std::int64_t run() {
    handshake();
    // Consolidated once: the in-place updates below keep it so, and each broadcast sends its buffer.
    TensorTree params = make_params(0, device_).consolidate();
    params.broadcast(kLearner, world_);

    start_ = interval_start_ = std::chrono::steady_clock::now();
    for (int round = 0; round < protocol_.rounds(); ++round) {
      receive_round(round);
      if (protocol_.broadcast_after(round)) {
        // A "training step": the next parameters, written in place.
        const TensorTree next = make_params(round + 1, device_);
        next.for_each_leaf([&](const Path& path, const Tensor& leaf) { params.get(path).copy_(leaf); });
        params.broadcast(kLearner, world_);
        ++broadcasts_;
      }
    }
    summary(seconds_since(start_));
    return verdicts_.failures();
  }

 private:
  // One from_remote_init per actor, point to point: its layout and its first trajectory (seq 0).
  void handshake() {
    for (int actor = 1; actor <= protocol_.actors; ++actor) {
      TensorTree first = TensorTree::from_remote_init(actor, world_);
      verdicts_.expect(first.is_consolidated(),
                       format("from_remote_init(%d) returned a tree that is not consolidated", actor));
      verdicts_.expect(first.batch_size() == Shape{o_.T, o_.B},
                       format("actor %d's trajectory has batch_size %s, expected [%" PRId64 ", %" PRId64 "]", actor,
                              shape_str(first.batch_size()).c_str(), o_.T, o_.B));
      check_trajectory(verdicts_, first.to(Device::cpu()), o_, {actor, 0, 0});
      if (actor == 1) {
        trajectory_bytes_ = payload_bytes(first);
        // The receive pool: every actor can have two sends in flight while a batch is being gathered.
        const std::size_t pool = static_cast<std::size_t>(2 * protocol_.actors + o_.batch);
        for (std::size_t i = 0; i < pool; ++i) {
          pool_.push_back(std::make_unique<TensorTree>(first.consolidate()));
          free_.push_back(pool_.back().get());
        }
      }
    }
  }

  void receive_round(int round) {
    std::vector<std::int64_t> left(per_actor_.size(), 0);
    for (int actor = 1; actor <= protocol_.actors; ++actor) {
      left[static_cast<std::size_t>(actor)] = protocol_.share(round, actor);
    }
    if (any_source_) {
      receive_from_any(round, left);
    } else {
      receive_from_each(round, left);
    }
  }

  // MPI: receives from any actor, matched in the order they were posted, so the oldest completes
  // first and source_rank() says whose trajectory it holds. Each actor has at most two sends in
  // flight, so 2 x actors receives cover them all; no more than the round's total are posted (the
  // actors send nothing of the next round before the broadcast that ends this one).
  void receive_from_any(int round, std::vector<std::int64_t>& left) {
    const std::int64_t total = protocol_.trajectories_in(round);
    const auto window = static_cast<std::size_t>(2 * protocol_.actors);
    std::int64_t posted = 0;
    std::deque<Posted> in_flight;
    for (std::int64_t received = 0; received < total; ++received) {
      while (in_flight.size() < window && posted < total) {
        TensorTree* tree = take_free();
        in_flight.push_back({tree, tree->irecv(kAnySource, world_, {.tag = kTrajectoryTag})});
        ++posted;
      }
      const Posted done = in_flight.front();
      in_flight.pop_front();
      done.work->wait();
      handle(done.tree, done.work->source_rank(), round, left);
    }
  }

  // NCCL has no receive from any source: two receives per actor (its share of the round at most),
  // and whichever actor's oldest one has completed is handled first.
  void receive_from_each(int round, std::vector<std::int64_t>& left) {
    const std::int64_t total = protocol_.trajectories_in(round);
    std::vector<std::int64_t> to_post = left;
    std::vector<std::deque<Posted>> queues(per_actor_.size());
    for (std::int64_t received = 0; received < total;) {
      for (std::size_t a = 1; a < queues.size(); ++a) {
        while (queues[a].size() < 2 && to_post[a] > 0) {
          TensorTree* tree = take_free();
          queues[a].push_back({tree, tree->irecv(static_cast<int>(a), world_, {.tag = kTrajectoryTag})});
          --to_post[a];
        }
      }
      bool progressed = false;
      for (std::size_t a = 1; a < queues.size(); ++a) {
        if (queues[a].empty() || !queues[a].front().work->is_completed()) continue;
        const Posted done = queues[a].front();
        queues[a].pop_front();
        done.work->wait();  // rethrows what the receive failed with
        handle(done.tree, static_cast<int>(a), round, left);
        ++received;
        progressed = true;
      }
      if (!progressed) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  TensorTree* take_free() {
    TensorTree* tree = free_.back();
    free_.pop_back();
    return tree;
  }

  // Checks one arrived trajectory and adds it to the batch being gathered.
  void handle(TensorTree* tree, int actor, int round, std::vector<std::int64_t>& left) {
    if (actor < 1 || actor > protocol_.actors) {
      verdicts_.fail(format("a trajectory came from rank %d, which is not an actor", actor));
      free_.push_back(tree);
      return;
    }
    const auto a = static_cast<std::size_t>(actor);
    verdicts_.expect(left[a] > 0, format("actor %d sent more than its %" PRId64 " trajectories of round %d", actor,
                                         protocol_.share(round, actor), round));
    --left[a];
    ++per_actor_[a];
    // Messages from one actor arrive in the order it sent them: its sequence numbers count up.
    const Stamp stamp{actor, next_seq_[a]++, round};
    const TrajectoryStats expected = check_trajectory(verdicts_, tree->to(Device::cpu()), o_, stamp);
    batch_expected_.reward_sum += expected.reward_sum;
    batch_expected_.done_count += expected.done_count;
    gathered_.push_back(tree);
    if (gathered_.size() == static_cast<std::size_t>(o_.batch)) learn_from_batch();
  }

  // Stacks the gathered trajectories into one learner batch, computes its statistics and checks
  // them against the trajectories they came from.
  void learn_from_batch() {
    std::vector<TensorTree> trees;
    XXH3_state_t* state = XXH3_createState();
    XXH3_64bits_reset(state);
    for (TensorTree* tree : gathered_) {
      trees.push_back(*tree);
      const Tensor obs = tree->get("obs").to(Device::cpu()).contiguous();
      XXH3_64bits_update(state, obs.data_ptr(), obs.nbytes());
    }
    const std::uint64_t sources_hash = XXH3_64bits_digest(state);
    XXH3_freeState(state);

    const TensorTree stacked = TensorTree::stack(trees).to(Device::cpu());
    const Shape want{static_cast<std::int64_t>(gathered_.size()), o_.T, o_.B};
    verdicts_.expect(stacked.batch_size() == want,
                     format("batch %d: stacked batch_size %s, expected %s", batches_ + 1,
                            shape_str(stacked.batch_size()).c_str(), shape_str(want).c_str()));
    const Tensor obs = stacked.get("obs").contiguous();
    const std::uint64_t obs_hash = XXH3_64bits(obs.data_ptr(), obs.nbytes());
    verdicts_.expect(obs_hash == sources_hash,
                     format("batch %d: obs checksum %016" PRIx64 " of the stacked batch, %016" PRIx64
                            " over its trajectories", batches_ + 1, obs_hash, sources_hash));

    const Tensor reward = stacked.get("reward").contiguous();
    const Tensor done = stacked.get("done").contiguous();
    double reward_sum = 0;
    std::int64_t done_count = 0;
    for (std::int64_t i = 0; i < reward.numel(); ++i) reward_sum += static_cast<double>(reward.data<float>()[i]);
    for (std::int64_t i = 0; i < done.numel(); ++i) done_count += done.data<bool>()[i] ? 1 : 0;
    verdicts_.expect(reward_sum == batch_expected_.reward_sum,
                     format("batch %d: reward sum %.6f, expected %.6f", batches_ + 1, reward_sum,
                            batch_expected_.reward_sum));
    verdicts_.expect(done_count == batch_expected_.done_count,
                     format("batch %d: %" PRId64 " done flags, expected %" PRId64, batches_ + 1, done_count,
                            batch_expected_.done_count));
    last_mean_reward_ = reward_sum / static_cast<double>(reward.numel());
    last_done_fraction_ = static_cast<double>(done_count) / static_cast<double>(done.numel());
    last_obs_hash_ = obs_hash;

    for (TensorTree* tree : gathered_) free_.push_back(tree);
    gathered_.clear();
    batch_expected_ = {};
    ++batches_;
    if (batches_ % o_.report_every == 0 || batches_ == o_.batches) report();
  }

  std::string per_actor_text() const {
    std::string text;
    for (std::size_t a = 1; a < per_actor_.size(); ++a) {
      if (a > 1) text += '/';
      text += std::to_string(per_actor_[a]);
    }
    return text;
  }

  void report() {
    const double seconds = seconds_since(interval_start_);
    const double batches = static_cast<double>(batches_ - interval_batches_);
    const double bytes = batches * o_.batch * static_cast<double>(trajectory_bytes_);
    say(format("[learner] batches %d/%d  %.1f batches/s  %.1f MB/s  per-actor %s  mean reward %.4f  done %.4f  "
               "obs xxh3 %016" PRIx64,
               batches_, o_.batches, batches / seconds, bytes / seconds / 1e6, per_actor_text().c_str(),
               last_mean_reward_, last_done_fraction_, last_obs_hash_));
    interval_start_ = std::chrono::steady_clock::now();
    interval_batches_ = batches_;
  }

  void summary(double seconds) {
    const double trajectories = static_cast<double>(batches_) * o_.batch;
    const double megabytes = trajectories * static_cast<double>(trajectory_bytes_) / 1e6;
    say(format("[learner] done: %d batches of %d trajectories (%.2f MB each) in %.2f s, %.1f batches/s, "
               "%.1f MB received, %.1f MB/s; per-actor %s; %d parameter broadcasts after version 0; "
               "%" PRId64 "/%" PRId64 " checks passed",
               batches_, o_.batch, static_cast<double>(trajectory_bytes_) / 1e6, seconds,
               static_cast<double>(batches_) / seconds, megabytes, megabytes / seconds, per_actor_text().c_str(),
               broadcasts_, verdicts_.checks() - verdicts_.failures(), verdicts_.checks()));
  }

  const Group& world_;
  const Options& o_;
  const Protocol& protocol_;
  Device device_;
  bool any_source_;
  Verdicts verdicts_;
  // Receive trees live at fixed addresses: an irecv in flight refers to its tree.
  std::vector<std::unique_ptr<TensorTree>> pool_;
  std::vector<TensorTree*> free_;
  std::vector<TensorTree*> gathered_;
  TrajectoryStats batch_expected_;
  std::vector<std::int64_t> per_actor_;  // indexed by rank; [0] unused
  std::vector<std::int64_t> next_seq_;
  std::size_t trajectory_bytes_ = 0;
  int batches_ = 0;
  int interval_batches_ = 0;
  int broadcasts_ = 0;
  double last_mean_reward_ = 0;
  double last_done_fraction_ = 0;
  std::uint64_t last_obs_hash_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point interval_start_;
};

void add_flags(CLI::App& app, Options& o) {
  app.add_option("--T", o.T, "time steps per trajectory")->check(CLI::Range(1, 1 << 20));
  app.add_option("--B", o.B, "environments per trajectory")->check(CLI::Range(1, 1 << 20));
  app.add_option("--height", o.height, "observation height (obs is 3 x height x width)")->check(CLI::Range(1, 1 << 14));
  app.add_option("--width", o.width, "observation width")->check(CLI::Range(1, 1 << 14));
  app.add_option("--batches", o.batches, "learner batches to receive")->check(CLI::Range(1, 1 << 24));
  app.add_option("--batch", o.batch, "trajectories stacked into one learner batch")->check(CLI::Range(1, 1 << 16));
  app.add_option("--broadcast-every", o.broadcast_every, "broadcast the parameters every K batches")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--report-every", o.report_every, "print a progress line every N batches")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--device", o.device, "where the trees live")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", o.seed, "varies every generated value");
  app.add_option("--corrupt-seq", o.corrupt_seq,
                 "testing the checks: actor 1 flips one obs byte of its trajectory with this sequence number "
                 "(0 is the handshake), and the run must fail");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The main job: rank 0 learns from trajectories that the other ranks act out; run under mpiexec"};
  Options o;
  add_flags(app, o);
  CLI11_PARSE(app, argc, argv);

  std::int64_t failures = 0;
  {
    DistributedContext context(&argc, &argv);
    const int rank = context.rank();
    if (context.size() < 2) {
      complain("actor_learner needs at least 2 ranks (one learner, one actor): run it under mpiexec -n 3");
      return 1;
    }
    // The context binds each rank to its own GPU; "cuda" means that one.
    const Device device = o.device == "cuda" ? context.device() : Device::cpu();
    if (o.device == "cuda" && !device.is_cuda()) {
      if (rank == 0) complain("no CUDA device: nothing to run on cuda");
      return 77;
    }
    const Protocol protocol{context.size() - 1, o.batches, o.batch, o.broadcast_every};
    try {
      if (rank == kLearner) {
        say(format("[learner] %d actor(s), trajectories [T %" PRId64 ", B %" PRId64 "] with obs 3x%" PRId64 "x%" PRId64
                   ", %d batches of %d, broadcast every %d, device %s, backend %s",
                   protocol.actors, o.T, o.B, o.height, o.width, o.batches, o.batch, o.broadcast_every,
                   device.str().c_str(), std::string(context.world().backend(device).name()).c_str()));
        Learner learner(context, o, protocol, device);
        failures = learner.run();
      } else {
        failures = run_actor(context, o, protocol, device);
      }
      // Every rank exits 0 only when every rank's checks passed.
      const Tensor total = Tensor::full({1}, static_cast<double>(failures), {DType::Int64});
      dist::all_reduce(total, context.world(), ReduceOp::Sum);
      failures = total.data<std::int64_t>()[0];
      if (rank == kLearner) {
        say(failures == 0 ? std::string("[learner] all checks passed on every rank")
                          : format("[learner] FAILED: %" PRId64 " check(s) failed across the ranks", failures));
      }
    } catch (const std::exception& error) {
      complain(format("[rank %d] failed: %s", rank, error.what()));
      // Leaving without finalizing MPI makes mpiexec end the other ranks, which may be waiting in a
      // collective or a receive this rank will never join.
      std::exit(EXIT_FAILURE);
    }
  }
  return failures == 0 ? 0 : 1;
}

// Many unpaced actors against one learner over tree channels: each actor process (this program
// again, --send) sends trees of --tree-bytes as fast as its credit allows; the learner serves every
// channel from one thread and checks every element of every tree (actor id and sequence in order).
// Two learner loops, a row each: "set", a ChannelSet's next() (one readiness wait, one tree a turn
// from each channel with one), and "each", try_recv(0) on every channel in turn, taking at most
// --per-turn trees from each. It reports the trees per second it took in all, the slowest actor's
// share against the fastest's, and its resident memory (VmRSS, sampled every 20 ms) before and at
// most: what credit bounds, whatever the actors do.
//
//   bench_channel_actors                                      32 actors, 1 KiB trees, 5 s a loop
//   bench_channel_actors --actors 3 --seconds 1 --loops set --csv          (CI)
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "sender_process.hpp"
#include "tensortree/channel_credential.hpp"
#include "tensortree/channel_set.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree_channel.hpp"

using namespace tensortree;
using namespace tensortree::bench;
using Clock = std::chrono::steady_clock;

namespace {

// Tree `sequence` of actor `actor`: int64 words, each actor * 2^40 + sequence * 2^10 + index.
TensorTree actor_tree(std::int64_t actor, std::int64_t sequence, std::int64_t words) {
  Tensor data = Tensor::empty({words}, {.dtype = DType::Int64});
  for (std::int64_t i = 0; i < words; ++i) data.data<std::int64_t>()[i] = (actor << 40) + (sequence << 10) + i;
  return TensorTree::from_map({}, {{"data", data}});
}

bool is_actor_tree(const TensorTree& tree, std::int64_t actor, std::int64_t sequence, std::int64_t words) {
  const Tensor& data = tree.get("data");
  if (data.numel() != words) return false;
  for (std::int64_t i = 0; i < words; ++i) {
    if (data.data<std::int64_t>()[i] != (actor << 40) + (sequence << 10) + i) return false;
  }
  return true;
}

// The actor: sends trees until the learner closes its end.
int run_actor(const std::string& address, std::int64_t actor, std::int64_t words) {
  try {
    TreeChannel channel = TreeChannel::connect(address, {.timeout = std::chrono::seconds(30)});
    TensorTree tree = actor_tree(actor, 0, words).consolidate();
    for (std::int64_t sequence = 0;; ++sequence) {
      std::int64_t* data = tree.get("data").data<std::int64_t>();
      for (std::int64_t i = 0; i < words; ++i) data[i] = (actor << 40) + (sequence << 10) + i;
      channel.send(tree);
    }
  } catch (const ChannelClosed&) {
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_channel_actors: actor %lld: %s\n", static_cast<long long>(actor), e.what());
    return 1;
  }
}

double resident_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

struct Actor {
  std::unique_ptr<SenderProcess> process;
  std::optional<TreeChannel> channel;
  std::int64_t id = 0;
  std::int64_t trees = 0;
};

struct Config {
  int actors = 32;
  std::int64_t tree_bytes = 1024;
  double seconds = 5;
  int per_turn = 4;
  std::vector<std::string> loops{"set", "each"};
  bool csv = false;
};

// The learner's side of one run: takes trees until `end`, checking each, and samples its RSS.
class Learner {
 public:
  Learner(std::vector<Actor>& actors, std::int64_t words) : actors_(actors), words_(words) {}

  void take(Actor& actor, const TensorTree& tree) {
    if (actor.trees == 0) actor.id = tree.get("data").data<std::int64_t>()[0] >> 40;
    if (!is_actor_tree(tree, actor.id, actor.trees, words_)) {
      throw CorruptData("bench_channel_actors: a tree differs from what its actor sent");
    }
    ++actor.trees;
    if (Clock::now() >= next_sample_) {
      rss_max = std::max(rss_max, resident_mib());
      next_sample_ += std::chrono::milliseconds(20);
    }
  }

  // Every channel polled in turn, at most `per_turn` trees each.
  void poll_each(Clock::time_point end, int per_turn) {
    while (Clock::now() < end) {
      for (Actor& actor : actors_) {
        for (int i = 0; i < per_turn; ++i) {
          std::optional<TensorTree> tree = actor.channel->try_recv(std::chrono::milliseconds(0));
          if (!tree) break;
          take(actor, *tree);
        }
      }
    }
    for (Actor& actor : actors_) actor.channel->close();
  }

  // One ChannelSet, one wait.
  void serve_set(Clock::time_point end) {
    ChannelSet set;
    std::vector<Actor*> actor_of(actors_.size() + 1);
    for (Actor& actor : actors_) actor_of.at(set.add(std::move(*actor.channel))) = &actor;
    while (Clock::now() < end) {
      std::optional<ChannelSet::Event> event = set.next(std::chrono::milliseconds(1));
      if (!event) continue;
      if (event->ended) std::rethrow_exception(event->ended);
      take(*actor_of.at(event->key), *event->tree);
    }
    set.for_each([](ChannelSet::Key, TreeChannel& channel) { channel.close(); });
  }

  double rss_max = resident_mib();

 private:
  std::vector<Actor>& actors_;
  std::int64_t words_;
  Clock::time_point next_sample_ = Clock::now();
};

int drive(const Config& config, const std::string& loop, Table& table) {
  const std::int64_t words = std::max<std::int64_t>(1, config.tree_bytes / 8);
  TreeListener listener = TreeListener::bind("127.0.0.1:0", {.timeout = std::chrono::seconds(30)});
  const double rss_before = resident_mib();
  std::vector<Actor> actors(static_cast<std::size_t>(config.actors));
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  for (std::size_t a = 0; a < actors.size(); ++a) {
    actors[a].process = std::make_unique<SenderProcess>(std::vector<std::string>{
        self, "--send", listener.address(), "--actor", std::to_string(a), "--tree-bytes", std::to_string(config.tree_bytes)});
  }
  for (Actor& actor : actors) {
    actor.channel = listener.accept(std::chrono::seconds(30));
    if (!actor.channel) throw Timeout("bench_channel_actors: an actor did not connect");
  }
  // The actor a channel belongs to is told by its first tree.
  Learner learner(actors, words);
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config.seconds));
  if (loop == "set") {
    learner.serve_set(end);
  } else {
    learner.poll_each(end, config.per_turn);
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::int64_t total = 0, slowest = actors.front().trees, fastest = 0;
  for (const Actor& actor : actors) {
    total += actor.trees;
    slowest = std::min(slowest, actor.trees);
    fastest = std::max(fastest, actor.trees);
  }
  int failed = 0;
  for (Actor& actor : actors) failed += actor.process->wait() != 0;
  table.add({loop, std::to_string(config.actors), std::to_string(config.tree_bytes), fixed(elapsed, 2),
             std::to_string(total), fixed(static_cast<double>(total) / elapsed, 0),
             fixed(fastest > 0 ? static_cast<double>(slowest) / static_cast<double>(fastest) : 0, 3),
             fixed(rss_before, 1), fixed(learner.rss_max, 1)});
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  // One job: the channels' credential, inherited by the actor processes.
  if (std::getenv(kChannelKeyVariable) == nullptr) {
    ::setenv(kChannelKeyVariable, ChannelCredential::generate().secret_text().c_str(), 1);
  }
  CLI::App app{"many unpaced actors against one learner over tree channels: throughput, fairness, memory"};
  Config config;
  std::string send_to;
  std::int64_t actor = 0;
  app.add_option("--actors", config.actors, "actor processes")->check(CLI::Range(1, 1024));
  app.add_option("--tree-bytes", config.tree_bytes, "bytes of each tree")->check(CLI::Range(8, 1 << 26));
  app.add_option("--seconds", config.seconds, "how long the learner takes trees")->check(CLI::PositiveNumber);
  app.add_option("--per-turn", config.per_turn, "trees the learner takes from a channel per turn at most")
      ->check(CLI::PositiveNumber);
  app.add_option("--loops", config.loops, "learner loops to run: set (a ChannelSet), each (try_recv on each channel)")
      ->check(CLI::IsMember({"set", "each"}));
  app.add_flag("--csv", config.csv, "print CSV instead of a table");
  app.add_option("--send", send_to, "(an actor process) the learner's address");
  app.add_option("--actor", actor, "(an actor process) its id");
  CLI11_PARSE(app, argc, argv);
  if (!send_to.empty()) return run_actor(send_to, actor, std::max<std::int64_t>(1, config.tree_bytes / 8));
  try {
    Table table({"loop", "actors", "tree_bytes", "seconds", "trees", "trees_per_s", "slowest_vs_fastest",
                 "rss_before_mib", "rss_max_mib"},
                config.csv);
    int failed = 0;
    for (const std::string& loop : config.loops) failed += drive(config, loop, table);
    table.print();
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_channel_actors: %s\n", e.what());
    return 1;
  }
}

// TensorTree's comm methods (tree_comm) between ranks that are threads, over the node-local
// shared-memory transport with the in-process backend as its control channel, and over the
// in-process backend alone. Every element of every leaf is checked (tests/dist/tree_values.hpp).
#include <catch2/catch.hpp>

#include <cstdio>
#include <latch>
#include <string>
#include <vector>

#include "../dist/tree_values.hpp"
#include "in_process_support.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"
#include "tree_mutations.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

constexpr std::int64_t kB = 4;

// Nested; two leaves larger than a node-local frame carries inline, the others smaller.
const std::vector<tensortree::test::LeafDef>& trajectory() {
  static const std::vector<tensortree::test::LeafDef> defs = {
      {"obs", DType::UInt8, {kB, 3, 16, 16}},
      {"action", DType::Int64, {kB}},
      {"reward", DType::Float32, {kB}},
      {"next.obs", DType::UInt8, {kB, 3, 16, 16}},
      {"info.episode.return", DType::Float64, {kB, 300}},
  };
  return defs;
}

// trajectory()'s leaves with another batch size: what a sender that changed its batch size sends.
std::vector<tensortree::test::LeafDef> trajectory_of_batch(std::int64_t batch) {
  std::vector<tensortree::test::LeafDef> defs = trajectory();
  for (tensortree::test::LeafDef& def : defs) def.shape[0] = batch;
  return defs;
}

// Leaves every reduction sums exactly.
const std::vector<tensortree::test::LeafDef>& numbers() {
  static const std::vector<tensortree::test::LeafDef> defs = {
      {"value", DType::Float64, {kB, 5}},
      {"count", DType::Int64, {kB}},
      {"nested.weight", DType::Float32, {kB, 2}},
  };
  return defs;
}

void expect_tree(const TensorTree& tree, int rank, int step, const std::string& what, int me,
                 const std::vector<tensortree::test::LeafDef>& leaves = trajectory()) {
  const std::string mismatch = tree_mismatch(tree, leaves, rank, step);
  expect(mismatch.empty(), what + " on rank " + std::to_string(me) + ": " + mismatch);
}

// A layout fingerprint as messages print it.
std::string fmt_layout(std::uint64_t fingerprint) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

void run(HostTransport transport, int size, const std::function<void(const Group&)>& body) {
  GroupOptions options = quick_options();
  options.host_transport = transport;
  run_ranks(size, body, options);
}

}  // namespace

TEST_CASE("in-process trees travel around a ring with send/recv and isend/irecv, consolidated or per leaf") {
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  const int size = GENERATE(2, 3);
  run(transport, size, [](const Group& group) {
    const int me = group.rank();
    const int right = (me + 1) % group.size();
    const int left = (me + group.size() - 1) % group.size();
    int step = 0;
    for (const TransferMode mode : {TransferMode::Consolidated, TransferMode::PerLeaf}) {
      for (const bool consolidated_sender : {false, true}) {
        ++step;
        const CommOptions options{.tag = 40 + step, .mode = mode};
        TensorTree outgoing = make_tree(trajectory(), {kB}, me, step);
        if (consolidated_sender) outgoing = outgoing.consolidate();
        TensorTree incoming = zeros_tree(trajectory(), {kB});
        // Every rank waits on its send first: it completes once the right neighbour took the tree.
        const WorkPtr sent = outgoing.isend(right, group, options);
        const WorkPtr received = incoming.irecv(left, group, options);
        sent->wait();
        received->wait();
        expect_tree(incoming, left, step, "irecv step " + std::to_string(step), me);
        expect_tree(outgoing, me, step, "the sent tree", me);
      }
    }
    ++step;
    if (me == 0) {
      make_tree(trajectory(), {kB}, me, step).send(1, group, {.tag = 7});
    } else if (me == 1) {
      TensorTree incoming = zeros_tree(trajectory(), {kB});
      incoming.recv(0, group, {.tag = 7});
      expect_tree(incoming, 0, step, "recv", me);
    }
  });
}

TEST_CASE("in-process init_remote sends a tree to a receiver that knew nothing of it") {
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  run(transport, 2, [](const Group& group) {
    if (group.rank() == 0) {
      make_tree(trajectory(), {kB}, 0, 3).init_remote(1, group);
      return;
    }
    expect_tree(TensorTree::from_remote_init(0, group), 0, 3, "from_remote_init", 1);
  });
}

TEST_CASE("a copy kept out of a pool of receiving trees keeps every element through 100 more receives") {
  // The README's pattern: irecv(kAnySource) into a pool of consolidated trees, keep some by copy.
  // Later receives into the pool must not change a kept copy, a kept sub-tree or a kept leaf.
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  constexpr int kPool = 4;
  constexpr int kKept = 4;
  constexpr int kPerSender = (kKept + 100) / 2;
  run(transport, 3, [](const Group& group) {
    if (group.rank() != 0) {
      TensorTree outgoing = make_tree(trajectory(), {kB}, group.rank(), 1).consolidate();
      for (int step = 1; step <= kPerSender; ++step) {
        fill_tree(outgoing, trajectory(), group.rank(), step);
        outgoing.send(0, group, {.tag = 3});
      }
      return;
    }
    std::vector<TensorTree> pool;
    for (int slot = 0; slot < kPool; ++slot) pool.push_back(zeros_tree(trajectory(), {kB}).consolidate());
    // Posted only once the pool has its final size: an irecv's tree must stay where it is.
    std::vector<WorkPtr> posted;
    for (TensorTree& tree : pool) posted.push_back(tree.irecv(kAnySource, group, {.tag = 3}));
    int posted_count = kPool;
    std::vector<int> steps(3, 0);  // per sender: each sends its trees in order
    struct Kept {
      int sender;
      int step;
      TensorTree tree;
      TensorTree next;
      Tensor obs;
    };
    std::vector<Kept> kept;
    for (int received = 0; received < 2 * kPerSender; ++received) {
      const auto slot = static_cast<std::size_t>(received % kPool);
      posted[slot]->wait();
      const int sender = posted[slot]->source_rank();
      const int step = ++steps[static_cast<std::size_t>(sender)];
      expect_tree(pool[slot], sender, step, "pool tree " + std::to_string(slot) + " from rank " +
                                                std::to_string(sender) + " step " + std::to_string(step), 0);
      expect(pool[slot].is_consolidated(), "a pool tree stays consolidated");
      if (received < kKept) kept.push_back({sender, step, pool[slot], pool[slot].subtree("next"), pool[slot].get("obs")});
      if (posted_count < 2 * kPerSender) {
        posted[slot] = pool[slot].irecv(kAnySource, group, {.tag = 3});
        ++posted_count;
      }
    }
    for (const Kept& k : kept) {
      const std::string what = "the tree kept from rank " + std::to_string(k.sender) + " step " + std::to_string(k.step);
      expect_tree(k.tree, k.sender, k.step, what + ", after 100 more receives", 0);
      expect(k.tree.is_consolidated(), "a kept copy stays consolidated");
      TensorTree whole_again = k.tree.clone();
      whole_again.set("next", k.next);
      whole_again.set("obs", k.obs);
      expect_tree(whole_again, k.sender, k.step, what + ": its kept sub-tree and leaf", 0);
    }
  });
}

TEST_CASE("a copy kept of a tree that broadcasts or scatters arrive in keeps every element through 100 more") {
  run(HostTransport::Auto, 2, [](const Group& group) {
    // Scatter: rank 0 keeps copies of what arrived, then takes 100 more.
    TensorTree scattered = make_tree(trajectory(), {kB}, 0, 0).consolidate();
    std::vector<TensorTree> kept_scattered;  // of steps 1 to 3
    for (int step = 1; step <= 103; ++step) {
      std::vector<TensorTree> trees;
      if (group.rank() == 1) trees = {make_tree(trajectory(), {kB}, 1, step), make_tree(trajectory(), {kB}, 1, step)};
      scattered.scatter(1, trees, group);
      expect_tree(scattered, 1, step, "scatter step " + std::to_string(step), group.rank());
      if (step <= 3) kept_scattered.push_back(scattered);
    }
    for (std::size_t k = 0; k < kept_scattered.size(); ++k) {
      const int step = static_cast<int>(k) + 1;
      expect_tree(kept_scattered[k], 1, step, "the scattered copy kept of step " + std::to_string(step), group.rank());
    }

    TensorTree tree = group.rank() == 1 ? make_tree(trajectory(), {kB}, 1, 1).consolidate() : TensorTree();
    tree.broadcast(1, group);
    std::vector<TensorTree> kept;  // of steps 1 to 3
    for (int step = 2; step <= 101; ++step) {
      if (step <= 4) kept.push_back(tree);
      if (group.rank() == 1) fill_tree(tree, trajectory(), 1, step);
      tree.broadcast(1, group);
      expect_tree(tree, 1, step, "broadcast step " + std::to_string(step), group.rank());
    }
    // On the receiver (the root's own copies share the leaves its fill_tree writes in place).
    if (group.rank() == 1) return;
    for (std::size_t k = 0; k < kept.size(); ++k) {
      const int step = static_cast<int>(k) + 1;
      expect_tree(kept[k], 1, step, "the copy kept of step " + std::to_string(step), group.rank());
    }
  });
}

TEST_CASE("in-process tree broadcast, all_gather and all_reduce give every rank every element") {
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  const int size = GENERATE(2, 3, 4);
  run(transport, size, [](const Group& group) {
    const int me = group.rank();
    const int root = group.size() - 1;
    TensorTree broadcast = make_tree(trajectory(), {kB}, me, 5);
    broadcast.broadcast(root, group);
    expect_tree(broadcast, root, 5, "broadcast", me);

    const std::vector<TensorTree> all = make_tree(trajectory(), {kB}, me, 6).all_gather(group);
    expect(static_cast<int>(all.size()) == group.size(), "one tree per rank");
    for (int r = 0; r < group.size(); ++r) {
      expect_tree(all[static_cast<std::size_t>(r)], r, 6, "all_gather tree " + std::to_string(r), me);
    }

    TensorTree summed = make_tree(numbers(), {kB}, me, 7);
    summed.all_reduce(group);
    for (std::size_t leaf = 0; leaf < numbers().size(); ++leaf) {
      const tensortree::test::LeafDef& def = numbers()[leaf];
      std::int64_t numel = 1;
      for (const std::int64_t d : def.shape) numel *= d;
      expect_elements(summed.get(def.path), numel, [&](std::int64_t i) {
        double total = 0;
        for (int r = 0; r < group.size(); ++r) total += leaf_value(r, 7, leaf, i);
        return total;
      }, std::string("all_reduce leaf ") + def.path, me);
    }
  });
}

TEST_CASE("in-process: a rank in a collective still takes the node-local frames its posted receives wait for") {
  // Rank 0 sends only once rank 1's receive is posted, so that no frame is taken when it is posted.
  std::latch receive_posted(1);
  run(HostTransport::Auto, 2, [&receive_posted](const Group& group) {
    // Rank 0 waits on its send before the barrier; rank 1 joins the barrier before it waits on its
    // receive. The send completes only once rank 1 took the tree, which it does inside the barrier.
    if (group.rank() == 0) {
      // Not consolidated: packed into the shared-memory transport's memory, which rank 1 reads in
      // place, so the send completes only on rank 1's acknowledgement.
      const TensorTree outgoing = make_tree(trajectory(), {kB}, 0, 9);
      receive_posted.wait();
      outgoing.isend(1, group, {.tag = 9})->wait();
      dist::barrier(group);
      return;
    }
    TensorTree incoming = zeros_tree(trajectory(), {kB});
    const WorkPtr received = incoming.irecv(0, group, {.tag = 9});
    receive_posted.count_down();
    dist::barrier(group);
    received->wait();
    expect_tree(incoming, 0, 9, "irecv across a barrier", 1);
  });
}

TEST_CASE("from_remote_init against a plain send says the sender must call init_remote; a layout mismatch says to") {
  std::string unpaired;
  std::string changed;
  run(HostTransport::Auto, 2, [&](const Group& group) {
    const TensorTree tree = make_tree(trajectory(), {kB}, group.rank(), 1);
    if (group.rank() == 0) {
      tree.send(1, group);
      // Then a tree whose batch size changed after the receiver learned the old layout.
      const std::vector<LeafDef> longer = trajectory_of_batch(kB + 1);
      make_tree(longer, {kB + 1}, 0, 2).send(1, group);
      return;
    }
    try {
      (void)TensorTree::from_remote_init(0, group);
    } catch (const SchemaMismatch& error) {
      unpaired = error.what();
    }
    TensorTree mine = make_tree(trajectory(), {kB}, 1, 1);
    try {
      mine.recv(0, group);
    } catch (const SchemaMismatch& error) {
      changed = error.what();
    }
  });
  INFO(unpaired);
  INFO(changed);
  CHECK_THAT(unpaired, Catch::Contains("from_remote_init: rank 0 sent a tree's data (layout 0x") &&
                           Catch::Contains("without init_remote") &&
                           Catch::Contains("Pair from_remote_init with init_remote on the sender"));
  CHECK_THAT(changed, Catch::Contains("recv from rank 0 (tag 0): the sender's tree is not of this tree's length") &&
                          Catch::Contains("pair init_remote on the sender with from_remote_init here"));
}

TEST_CASE("recv into a tree of another layout names the first key that differs and both layouts, where this rank "
          "has seen the sender's layout") {
  std::string message;
  std::uint64_t mine = 0;
  std::uint64_t theirs = 0;
  run(HostTransport::Auto, 2, [&](const Group& group) {
    // Of one byte length: the header arrives, and only the layouts tell the trees apart.
    const std::vector<LeafDef> sent = {{"obs.pixels", DType::Int32, {kB, 4}}, {"reward", DType::Float32, {kB}}};
    const std::vector<LeafDef> held = {{"obs.pixels", DType::Float32, {kB, 4}}, {"reward", DType::Float32, {kB}}};
    if (group.rank() == 0) {
      const TensorTree tree = make_tree(sent, {kB}, 0, 1).consolidate();
      tree.init_remote(1, group);  // rank 1 learns this layout
      tree.send(1, group);
      theirs = tree.schema()->fingerprint();
      return;
    }
    expect_tree(TensorTree::from_remote_init(0, group), 0, 1, "from_remote_init", 1, sent);
    TensorTree into = make_tree(held, {kB}, 1, 2).consolidate();
    mine = into.schema()->fingerprint();
    try {
      into.recv(0, group);
    } catch (const SchemaMismatch& error) {
      message = error.what();
    }
    expect_tree(into, 1, 2, "the tree a failed receive left", 1, held);
  });
  INFO(message);
  CHECK_THAT(message, Catch::Contains("at key 'obs.pixels': int32 [4, 4] there, float32 [4, 4] here"));
  CHECK_THAT(message, Catch::Contains(fmt_layout(theirs)) && Catch::Contains(fmt_layout(mine)));
  CHECK_THAT(message, Catch::StartsWith("recv from rank 0 (tag 0): the sender's tree (layout "));
}

TEST_CASE("recv from a sender whose batch size changed after init_remote says to call init_remote again, or to "
          "turn debug mode on to learn the key, and that the message is dropped") {
  std::string message;
  run(HostTransport::Auto, 2, [&](const Group& group) {
    const std::vector<LeafDef> longer = trajectory_of_batch(kB + 1);
    if (group.rank() == 0) {
      make_tree(trajectory(), {kB}, 0, 1).init_remote(1, group);
      make_tree(longer, {kB + 1}, 0, 2).send(1, group);
      return;
    }
    TensorTree received = TensorTree::from_remote_init(0, group);
    try {
      received.recv(0, group);
    } catch (const SchemaMismatch& error) {
      message = error.what();
    }
    expect_tree(received, 0, 1, "the tree a failed receive left", 1);
  });
  INFO(message);
  CHECK_THAT(message, Catch::StartsWith("recv from rank 0 (tag 0): ") &&
                          Catch::Contains("This tree's layout came from rank 0's init_remote") &&
                          Catch::Contains("must call init_remote again") &&
                          Catch::Contains("set TENSORTREE_DISTRIBUTED_DEBUG=DETAIL (or GroupOptions::debug_checks) "
                                          "on every rank, and recv names the first key that differs") &&
                          Catch::Contains("the message is dropped"));
}

TEST_CASE("broadcast into a tree of another layout names the first key that differs") {
  std::string message;
  run(HostTransport::Auto, 3, [&](const Group& group) {
    const std::vector<LeafDef> other = {{"obs", DType::UInt8, {kB, 3, 16, 16}},
                                        {"action", DType::Int32, {kB}},
                                        {"reward", DType::Float32, {kB}},
                                        {"next.obs", DType::UInt8, {kB, 3, 16, 16}},
                                        {"info.episode.return", DType::Float64, {kB, 300}}};
    const bool wrong = group.rank() == 1;
    TensorTree tree = make_tree(wrong ? other : trajectory(), {kB}, group.rank(), 4);
    if (!wrong) {
      tree.broadcast(2, group);
      expect_tree(tree, 2, 4, "broadcast", group.rank());
      return;
    }
    try {
      tree.broadcast(2, group);
    } catch (const SchemaMismatch& error) {
      message = error.what();
    }
  });
  INFO(message);
  CHECK_THAT(message, Catch::StartsWith("broadcast from rank 2: the root's tree (layout 0x") &&
                          Catch::Contains("at key 'action': int64 [4] there, int32 [4] here"));
}

TEST_CASE("in debug mode, recv into a tree of another layout names the first key that differs even for a layout "
          "this rank never saw, and the pair's later transfers still arrive") {
  std::string other_layout;
  std::string changed_batch;
  GroupOptions options = quick_options();
  options.host_transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  options.debug_checks = true;
  run_ranks(2, [&](const Group& group) {
    const std::vector<LeafDef> sent = {{"obs.pixels", DType::Float32, {kB, 84}}, {"reward", DType::Float32, {kB}}};
    const std::vector<LeafDef> held = {{"obs.pixels", DType::Float32, {kB, 64}}, {"reward", DType::Float32, {kB}}};
    if (group.rank() == 0) {
      make_tree(sent, {kB}, 0, 1).send(1, group);                     // a layout rank 1 never saw
      make_tree(held, {kB}, 0, 2).send(1, group);                     // then the right one
      make_tree(trajectory(), {kB}, 0, 3).init_remote(1, group);      // then init_remote,
      make_tree(trajectory_of_batch(kB + 1), {kB + 1}, 0, 4).send(1, group);  // a changed batch size
      make_tree(trajectory(), {kB}, 0, 5).send(1, group);             // and the announced layout again
      return;
    }
    TensorTree into = make_tree(held, {kB}, 1, 9).consolidate();
    try {
      into.recv(0, group);
    } catch (const SchemaMismatch& error) {
      other_layout = error.what();
    }
    expect_tree(into, 1, 9, "the tree a failed receive left", 1, held);
    expect(into.recv(kAnySource, group) == 0, "the next receive names its sender");
    expect_tree(into, 0, 2, "the transfer after a mismatch", 1, held);

    TensorTree announced = TensorTree::from_remote_init(0, group);
    expect_tree(announced, 0, 3, "from_remote_init in debug mode", 1);
    try {
      announced.recv(0, group);
    } catch (const SchemaMismatch& error) {
      changed_batch = error.what();
    }
    announced.recv(0, group);
    expect_tree(announced, 0, 5, "the transfer after a changed batch size", 1);
  }, options);
  INFO(other_layout);
  INFO(changed_batch);
  CHECK_THAT(other_layout, Catch::StartsWith("recv from rank 0 (tag 0): the sender's tree (layout 0x") &&
                               Catch::Contains("at key 'obs.pixels': float32 [4, 84] there, float32 [4, 64] here"));
  CHECK_THAT(changed_batch, Catch::Contains("at key '") && Catch::Contains("[5") &&
                                Catch::Contains("This tree's layout came from rank 0's init_remote") &&
                                Catch::Contains("must call init_remote again"));
}

TEST_CASE("a tree broadcast again after each kind of change arrives with its current leaves") {
  // The sender keeps one tree and changes it between transfers, so its second transfer would use a
  // stale packing plan if a change failed to renew the tree's structure version. The receiver makes
  // the same change to its own tree to know what must arrive.
  const std::vector<TreeMutation> mutations = tree_mutations();
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  run(transport, 2, [&](const Group& group) {
    for (const TreeMutation& mutation : mutations) {
      const std::string what = "the transfer after '" + mutation.name + "'";
      TensorTree tree = mutation_base_tree(1);
      TensorTree first;
      (group.rank() == 0 ? tree : first).broadcast(0, group);
      mutation.apply(tree);
      TensorTree second;
      (group.rank() == 0 ? tree : second).broadcast(0, group);
      if (group.rank() == 1) {
        expect(first.equal(mutation_base_tree(1)), "the transfer before '" + mutation.name + "'");
        expect(second.equal(tree), what);
      }
    }
  });
}

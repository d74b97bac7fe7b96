// dist_ops' collectives on 2, 3 and 4 ranks as threads, through the in-process backend's
// collectives over pairs (behind the node-local transport, or alone with HostTransport::Mpi).
// Every rank contributes rank-dependent non-zero values and checks every element it gets.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "in_process_support.hpp"
#include "tensortree/dist_ops.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

constexpr std::int64_t kLength = 10;

struct Setup {
  int size;
  HostTransport transport;
};

Setup setup() {
  const int size = GENERATE(2, 3, 4);
  const HostTransport transport = GENERATE(HostTransport::Auto, HostTransport::Mpi);
  return {size, transport};
}

void run(const Setup& s, const std::function<void(const Group&)>& body) {
  GroupOptions options = quick_options();
  options.host_transport = s.transport;
  run_ranks(s.size, body, options);
}

Tensor own(const Group& group, DType dtype = DType::Float32) {
  return make_tensor({kLength}, dtype, [rank = group.rank()](std::int64_t i) { return rank_value(rank, i); });
}

}  // namespace

TEST_CASE("in-process broadcast gives every rank the root's values") {
  run(setup(), [](const Group& group) {
    const int root = group.size() - 1;
    const Tensor tensor = own(group);
    dist::broadcast(tensor, root, group);
    expect_elements(tensor, kLength, [root](std::int64_t i) { return rank_value(root, i); }, "broadcast", group.rank());
  });
}

TEST_CASE("in-process all_reduce sums, takes the max, averages and xors every element on every rank") {
  run(setup(), [](const Group& group) {
    const int n = group.size();
    const Tensor sum = own(group, DType::Float64);
    dist::all_reduce(sum, group);
    expect_elements(sum, kLength, [n](std::int64_t i) {
      double total = 0;
      for (int r = 0; r < n; ++r) total += rank_value(r, i);
      return total;
    }, "SUM", group.rank());

    const Tensor max = own(group, DType::Int32);
    dist::all_reduce(max, group, ReduceOp::Max);
    expect_elements(max, kLength, [n](std::int64_t i) { return rank_value(n - 1, i); }, "MAX", group.rank());

    const Tensor avg = own(group, DType::Float32);
    dist::all_reduce(avg, group, ReduceOp::Avg);
    expect_elements(avg, kLength, [n](std::int64_t i) {
      float total = 0;
      for (int r = 0; r < n; ++r) total += static_cast<float>(rank_value(r, i));
      return static_cast<double>(total / static_cast<float>(n));
    }, "AVG", group.rank());

    const Tensor bits = own(group, DType::Int64);
    dist::all_reduce(bits, group, ReduceOp::BitwiseXor);
    expect_elements(bits, kLength, [n](std::int64_t i) {
      std::int64_t x = 0;
      for (int r = 0; r < n; ++r) x ^= static_cast<std::int64_t>(rank_value(r, i));
      return static_cast<double>(x);
    }, "BXOR", group.rank());
  });
}

TEST_CASE("in-process reduce leaves the product on the root and the other ranks' tensors as they were") {
  run(setup(), [](const Group& group) {
    const int n = group.size();
    const int root = n - 1;
    const Tensor tensor = make_tensor({kLength}, DType::Int64, [&](std::int64_t i) { return group.rank() + i + 2.0; });
    dist::reduce(tensor, root, group, ReduceOp::Product);
    expect_elements(tensor, kLength, [&](std::int64_t i) {
      if (group.rank() != root) return group.rank() + i + 2.0;
      double product = 1;
      for (int r = 0; r < n; ++r) product *= static_cast<double>(r + i + 2);
      return product;
    }, "PRODUCT", group.rank());
  });
}

TEST_CASE("in-process all_gather and gather put rank r's values in block r") {
  run(setup(), [](const Group& group) {
    const std::vector<Tensor> all = dist::all_gather(own(group, DType::Int16), group);
    expect(static_cast<int>(all.size()) == group.size(), "one tensor per rank");
    for (int r = 0; r < group.size(); ++r) {
      expect_elements(all[static_cast<std::size_t>(r)], kLength, [r](std::int64_t i) { return rank_value(r, i); },
                      "all_gather block " + std::to_string(r), group.rank());
    }
    const int root = group.size() - 1;
    const std::vector<Tensor> gathered = dist::gather(own(group, DType::UInt16), root, group);
    expect(static_cast<int>(gathered.size()) == (group.rank() == root ? group.size() : 0), "gather's results on the root only");
    for (std::size_t r = 0; r < gathered.size(); ++r) {
      expect_elements(gathered[r], kLength, [r](std::int64_t i) { return rank_value(static_cast<int>(r), i); },
                      "gather block " + std::to_string(r), group.rank());
    }
  });
}

TEST_CASE("in-process scatter gives rank r the root's block r") {
  run(setup(), [](const Group& group) {
    const int root = group.size() - 1;
    std::vector<Tensor> inputs;
    if (group.rank() == root) {
      for (int r = 0; r < group.size(); ++r) {
        inputs.push_back(make_tensor({kLength}, DType::Float64, [r](std::int64_t i) { return rank_value(r, i) * 3; }));
      }
    }
    const Tensor mine = dist::scatter(inputs, root, group);
    expect_elements(mine, kLength, [&](std::int64_t i) { return rank_value(group.rank(), i) * 3; }, "scatter",
                    group.rank());
  });
}

TEST_CASE("in-process reduce_scatter sums block r of every rank into rank r") {
  run(setup(), [](const Group& group) {
    const int n = group.size();
    std::vector<Tensor> inputs;
    for (int block = 0; block < n; ++block) {
      inputs.push_back(make_tensor({kLength}, DType::Float32,
                                   [&](std::int64_t i) { return rank_value(group.rank(), i) + 100 * block; }));
    }
    const Tensor mine = dist::reduce_scatter(inputs, group);
    expect_elements(mine, kLength, [&](std::int64_t i) {
      double total = 0;
      for (int r = 0; r < n; ++r) total += rank_value(r, i) + 100 * group.rank();
      return total;
    }, "reduce_scatter", group.rank());
  });
}

TEST_CASE("in-process all_to_all_single with uneven splits moves block r of rank s to block s of rank r") {
  run(setup(), [](const Group& group) {
    const int n = group.size();
    const int me = group.rank();
    // Rank s sends (s + r + 1) elements to rank r, each 10000 * s + 100 * r + i + 1.
    dist::AllToAllSplits splits;
    std::int64_t in_total = 0;
    std::int64_t out_total = 0;
    for (int r = 0; r < n; ++r) {
      splits.input_splits.push_back(me + r + 1);
      splits.output_splits.push_back(r + me + 1);
      in_total += me + r + 1;
      out_total += r + me + 1;
    }
    std::vector<double> sent;
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < me + r + 1; ++i) sent.push_back(10000.0 * me + 100.0 * r + i + 1);
    }
    const Tensor input = make_tensor({in_total}, DType::Int32, [&](std::int64_t i) { return sent[static_cast<std::size_t>(i)]; });
    const Tensor output = dist::all_to_all_single(input, group, splits);
    std::vector<double> expected;
    for (int s = 0; s < n; ++s) {
      for (int i = 0; i < s + me + 1; ++i) expected.push_back(10000.0 * s + 100.0 * me + i + 1);
    }
    expect_elements(output, out_total, [&](std::int64_t i) { return expected[static_cast<std::size_t>(i)]; },
                    "all_to_all_single", me);
  });
}

TEST_CASE("in-process barrier and a run of asynchronous collectives complete in any waiting order") {
  run(setup(), [](const Group& group) {
    dist::barrier(group);
    const Tensor first = own(group, DType::Float64);
    const Tensor second = make_tensor({3}, DType::UInt8, [&](std::int64_t i) { return group.rank() * 10 + i + 1.0; });
    const WorkPtr sum = dist::all_reduce_async(first, group);
    const WorkPtr copy = dist::broadcast_async(second, 0, group);
    copy->wait();
    sum->wait();
    const int n = group.size();
    expect_elements(second, 3, [](std::int64_t i) { return i + 1.0; }, "broadcast", group.rank());
    expect_elements(first, kLength, [n](std::int64_t i) {
      double total = 0;
      for (int r = 0; r < n; ++r) total += rank_value(r, i);
      return total;
    }, "all_reduce", group.rank());
    dist::barrier(group);
  });
}

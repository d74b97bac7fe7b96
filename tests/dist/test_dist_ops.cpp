// dist_ops' fixed-shape operations on the world, a sub-group and each mesh dimension: rank-dependent
// non-zero data, the last rank as root, every element checked on every rank.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "ops_test_support.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

const Shape kShape{3, 5};

// Element i (C order) of a [rows, cols] transposed view of a [cols, rows] tensor sits at this
// linear index of the tensor it views.
std::int64_t transposed_index(std::int64_t i, std::int64_t rows, std::int64_t cols) {
  return (i % cols) * rows + i / cols;
}

// A [rows, cols] view, transposed from a [cols, rows] tensor holding base(j) at linear index j.
Tensor transposed_tensor(std::int64_t rows, std::int64_t cols, DType dtype, const ValueAt& base) {
  return make_tensor({cols, rows}, dtype, base).transpose(0, 1);
}

ValueAt through_transpose(std::int64_t rows, std::int64_t cols, const ValueAt& base) {
  return [=](std::int64_t i) { return base(transposed_index(i, rows, cols)); };
}

ValueAt small_values_of(int rank) {
  return [rank](std::int64_t i) { return small_value(rank, i); };
}

// Element i reduced with `op` over the `ranks` ranks whose element i is value(rank, i).
ValueAt reduced_values(ReduceOp op, int ranks, DType dtype, double (*value)(int, std::int64_t),
                       std::int64_t offset = 0) {
  return [=](std::int64_t i) {
    return reduced(op, ranks, is_integral(dtype), [=](int r) { return value(r, offset + i); });
  };
}

// float Avg may divide or multiply by the reciprocal: one rounding apart.
double tolerance_for(ReduceOp op, DType dtype) {
  if (op != ReduceOp::Avg || is_integral(dtype)) return 0.0;
  return dtype == DType::Float32 ? 1e-5 : 1e-12;
}

struct ReduceCase {
  DType dtype;
  ReduceOp op;
  double (*value)(int, std::int64_t);
};

// Every arithmetic op on a float and an integer dtype, and every bitwise op on two integer dtypes.
std::vector<ReduceCase> reduce_cases(std::initializer_list<DType> arithmetic, std::initializer_list<DType> bitwise) {
  std::vector<ReduceCase> cases;
  for (DType dtype : arithmetic) {
    for (ReduceOp op : kArithmeticOps) cases.push_back({dtype, op, small_value});
  }
  for (DType dtype : bitwise) {
    for (ReduceOp op : kBitwiseOps) cases.push_back({dtype, op, bits_value});
  }
  return cases;
}

// The rows rank `src` sends to rank `dst` in the uneven all_to_all_single tests (zero included).
std::int64_t rows_between(int src, int dst) { return (src + 2 * dst) % 3; }

constexpr std::int64_t kRowWidth = 3;

// Row j of rank `rank`'s all_to_all_single input.
double row_value(int rank, std::int64_t row, std::int64_t col) {
  return 1000.0 * (rank + 1) + 10.0 * static_cast<double>(row) + static_cast<double>(col) + 1.0;
}

Tensor rows_input(int rank, std::int64_t rows) {
  return make_tensor({rows, kRowWidth}, DType::Int64,
                     [rank](std::int64_t i) { return row_value(rank, i / kRowWidth, i % kRowWidth); });
}

// What rank `me` receives when rank r sends splits(r, p) rows to each rank p, from its rows in order.
std::vector<double> expected_rows(int me, int ranks, const std::function<std::int64_t(int, int)>& splits) {
  std::vector<double> values;
  for (int r = 0; r < ranks; ++r) {
    std::int64_t first_row = 0;
    for (int p = 0; p < me; ++p) first_row += splits(r, p);
    for (std::int64_t row = first_row; row < first_row + splits(r, me); ++row) {
      for (std::int64_t col = 0; col < kRowWidth; ++col) values.push_back(row_value(r, row, col));
    }
  }
  return values;
}

ValueAt from_list(std::vector<double> values) {
  return [values = std::move(values)](std::int64_t i) { return values[static_cast<std::size_t>(i)]; };
}

}  // namespace

TEST_CASE("dist_ops: broadcast from the last rank replaces every rank's tensor, strided views included", "[ops]") {
  for_each_group([](const Group& group) {
    const int root = last_rank(group);
    const Tensor tensor = transposed_tensor(3, 5, DType::Float32, values_of(group.rank()));
    dist::broadcast(tensor, root, group);
    CHECK(mismatch(tensor, DType::Float32, {3, 5}, through_transpose(3, 5, values_of(root))) == "");
  });
}

TEST_CASE("dist_ops: all_reduce combines every rank's values with every reduce op", "[ops]") {
  for_each_group([](const Group& group) {
    for (const ReduceCase& c : reduce_cases({DType::Float64, DType::Float32, DType::Int32, DType::Int64},
                                            {DType::UInt8, DType::Int32, DType::Int64})) {
      INFO(c.dtype << " " << c.op);
      const Tensor tensor = make_tensor(kShape, c.dtype, [&](std::int64_t i) { return c.value(group.rank(), i); });
      dist::all_reduce(tensor, group, c.op);
      CHECK(mismatch(tensor, c.dtype, kShape, reduced_values(c.op, group.size(), c.dtype, c.value),
                     tolerance_for(c.op, c.dtype)) == "");
    }
  });
}

TEST_CASE("dist_ops: all_reduce writes the result back into a strided view", "[ops]") {
  for_each_group([](const Group& group) {
    const Tensor tensor = transposed_tensor(3, 5, DType::Int64, small_values_of(group.rank()));
    dist::all_reduce(tensor, group, ReduceOp::Max);
    CHECK(mismatch(tensor, DType::Int64, {3, 5},
                   through_transpose(3, 5, reduced_values(ReduceOp::Max, group.size(), DType::Int64, small_value))) ==
          "");
  });
}

TEST_CASE("dist_ops: reduce lands each op's result in the root's strided view, the others' left alone", "[ops]") {
  for_each_group([](const Group& group) {
    const int root = last_rank(group);
    for (const ReduceCase& c : reduce_cases({DType::Float64, DType::Int32}, {DType::Int64})) {
      INFO(c.dtype << " " << c.op);
      const ValueAt mine = [&](std::int64_t i) { return c.value(group.rank(), i); };
      const Tensor tensor = transposed_tensor(3, 5, c.dtype, mine);
      dist::reduce(tensor, root, group, c.op);
      const ValueAt expected = group.rank() == root ? reduced_values(c.op, group.size(), c.dtype, c.value) : mine;
      CHECK(mismatch(tensor, c.dtype, {3, 5}, through_transpose(3, 5, expected), tolerance_for(c.op, c.dtype)) == "");
    }
  });
}

TEST_CASE("dist_ops: all_gather returns every rank's tensor in rank order, as views of one allocation", "[ops]") {
  for_each_group([](const Group& group) {
    const Tensor tensor = make_tensor({2, 3}, DType::Int64, values_of(group.rank()));
    const std::vector<Tensor> gathered = dist::all_gather(tensor, group);
    check_one_per_rank<Tensor>(gathered, group, [&](const Tensor& from, int rank) {
      CHECK(mismatch(from, DType::Int64, {2, 3}, values_of(rank)) == "");
      CHECK(from.storage() == gathered[0].storage());
    });
  });
}

TEST_CASE("dist_ops: all_gather_into_tensor concatenates every rank's strided tensor along dimension 0", "[ops]") {
  for_each_group([](const Group& group) {
    const Tensor tensor = transposed_tensor(2, 3, DType::Float64, values_of(group.rank()));
    const Tensor gathered = dist::all_gather_into_tensor(tensor, group);
    const ValueAt expected = [](std::int64_t i) {
      const std::int64_t row = i / 3;
      return rank_value(static_cast<int>(row / 2), transposed_index((row % 2) * 3 + i % 3, 2, 3));
    };
    CHECK(mismatch(gathered, DType::Float64, {2 * group.size(), 3}, expected) == "");
  });
}

TEST_CASE("dist_ops: gather gives the last rank every rank's tensor and the others nothing", "[ops]") {
  for_each_group([](const Group& group) {
    const int root = last_rank(group);
    const Tensor tensor = make_tensor({4}, DType::Int32, values_of(group.rank()));
    check_gathered<Tensor>(dist::gather(tensor, root, group), group, root, [](const Tensor& from, int rank) {
      CHECK(mismatch(from, DType::Int32, {4}, values_of(rank)) == "");
    });
  });
}

TEST_CASE("dist_ops: scatter from the last rank delivers each rank its tensor, shape and dtype learned", "[ops]") {
  for_each_group([](const Group& group) {
    const int root = last_rank(group);
    std::vector<Tensor> inputs;
    if (group.rank() == root) {
      for (int r = 0; r < group.size(); ++r) inputs.push_back(transposed_tensor(2, 4, DType::Int16, values_of(r)));
    }
    const Tensor mine = dist::scatter(inputs, root, group);
    CHECK(mismatch(mine, DType::Int16, {2, 4}, through_transpose(2, 4, values_of(group.rank()))) == "");
  });
}

TEST_CASE("dist_ops: reduce_scatter (list form) reduces inputs[r] of every rank into rank r, every op", "[ops]") {
  for_each_group([](const Group& group) {
    constexpr std::int64_t kBlock = 6;
    for (const ReduceCase& c : reduce_cases({DType::Float64, DType::Int32}, {DType::Int64})) {
      INFO(c.dtype << " " << c.op);
      std::vector<Tensor> inputs;
      for (int r = 0; r < group.size(); ++r) {
        const ValueAt block_values = [&](std::int64_t i) { return c.value(group.rank(), r * kBlock + i); };
        inputs.push_back(make_tensor({2, 3}, c.dtype, block_values));
      }
      const Tensor mine = dist::reduce_scatter(inputs, group, c.op);
      CHECK(mismatch(mine, c.dtype, {2, 3},
                     reduced_values(c.op, group.size(), c.dtype, c.value, group.rank() * kBlock),
                     tolerance_for(c.op, c.dtype)) == "");
    }
  });
}

TEST_CASE("dist_ops: reduce_scatter_tensor reduces block r of dimension 0 into rank r, every reduce op", "[ops]") {
  for_each_group([](const Group& group) {
    for (const ReduceCase& c : reduce_cases({DType::Float32, DType::Int64}, {DType::Int32})) {
      INFO(c.dtype << " " << c.op);
      const ValueAt input_values = [&](std::int64_t i) { return c.value(group.rank(), i); };
      const Tensor input = make_tensor({2 * group.size(), 3}, c.dtype, input_values);
      const Tensor mine = dist::reduce_scatter_tensor(input, group, c.op);
      CHECK(mismatch(mine, c.dtype, {2, 3}, reduced_values(c.op, group.size(), c.dtype, c.value, group.rank() * 6),
                     tolerance_for(c.op, c.dtype)) == "");
    }
  });
}

TEST_CASE("dist_ops: all_to_all sends inputs[r] to rank r and returns what each rank sent here", "[ops]") {
  for_each_group([](const Group& group) {
    const int me = group.rank();
    std::vector<Tensor> inputs;
    for (int r = 0; r < group.size(); ++r) {
      const ValueAt for_rank_r = [&](std::int64_t i) { return 100.0 * me + 10.0 * r + i + 1; };
      inputs.push_back(make_tensor({2, 2}, DType::Float64, for_rank_r));
    }
    const std::vector<Tensor> received = dist::all_to_all(inputs, group);
    CHECK(received.size() == inputs.size());
    for (std::size_t r = 0; r < received.size(); ++r) {
      INFO("from rank " << r);
      CHECK(mismatch(received[r], DType::Float64, {2, 2},
                     [&](std::int64_t i) { return 100.0 * static_cast<double>(r) + 10.0 * me + i + 1; }) == "");
    }
  });
}

TEST_CASE("dist_ops: all_to_all_single with equal blocks exchanges rows", "[ops]") {
  for_each_group([](const Group& group) {
    const int n = group.size();
    const Tensor output = dist::all_to_all_single(rows_input(group.rank(), 2 * n), group);
    const auto two_each = [](int, int) { return std::int64_t{2}; };
    const ValueAt expected = from_list(expected_rows(group.rank(), n, two_each));
    CHECK(mismatch(output, DType::Int64, {2 * n, kRowWidth}, expected) == "");
  });
}

TEST_CASE("dist_ops: all_to_all_single with uneven splits learns or takes the output splits", "[ops]") {
  for_each_group([](const Group& group) {
    const int n = group.size();
    const int me = group.rank();
    dist::AllToAllSplits splits;
    for (int p = 0; p < n; ++p) splits.input_splits.push_back(rows_between(me, p));
    const std::int64_t rows = std::accumulate(splits.input_splits.begin(), splits.input_splits.end(), std::int64_t{0});
    const std::vector<double> expected = expected_rows(me, n, rows_between);
    const auto expected_rows_here = static_cast<std::int64_t>(expected.size()) / kRowWidth;

    const Tensor learned = dist::all_to_all_single(rows_input(me, rows), group, splits);
    CHECK(mismatch(learned, DType::Int64, {expected_rows_here, kRowWidth}, from_list(expected)) == "");

    for (int r = 0; r < n; ++r) splits.output_splits.push_back(rows_between(r, me));
    const Tensor given = dist::all_to_all_single(rows_input(me, rows), group, splits);
    CHECK(mismatch(given, DType::Int64, {expected_rows_here, kRowWidth}, from_list(expected)) == "");
  });
}

TEST_CASE("dist_ops: barrier completes on every member of every group", "[ops]") {
  for_each_group([](const Group& group) {
    const WorkPtr work = dist::barrier_async(group);
    work->wait();
    CHECK(work->is_completed());
    dist::barrier(group);
  });
}

TEST_CASE("dist_ops: send and recv pass rank-tagged values around a ring, into a strided view", "[ops]") {
  for_each_group([](const Group& group) {
    const int n = group.size();
    const int me = group.rank();
    const int left = (me + n - 1) % n;
    const WorkPtr sent = dist::isend(make_tensor({3, 4}, DType::Float64, values_of(me)), (me + 1) % n, group, {.tag = 5});
    const Tensor landing = transposed_tensor(3, 4, DType::Float64, [](std::int64_t) { return -1.0; });
    dist::recv(landing, left, group, {.tag = 5});
    sent->wait();
    // The 12 values arrive in C order of the 3x4 view they land in.
    CHECK(mismatch(landing, DType::Float64, {3, 4}, values_of(left)) == "");
    dist::barrier(group);
    if (n > 1) {
      // The blocking send completes once the matching receive is posted.
      const Tensor echo = Tensor::zeros({2}, {DType::Int32});
      const WorkPtr received = dist::irecv(echo, left, group, {.tag = 6});
      dist::send(make_tensor({2}, DType::Int32, values_of(me)), (me + 1) % n, group, {.tag = 6});
      received->wait();
      CHECK(mismatch(echo, DType::Int32, {2}, values_of(left)) == "");
    }
  });
}

TEST_CASE("dist_ops: recv_any receives from every other rank and names the sender of each message", "[ops]") {
  for_each_group([](const Group& group) {
    const int collector = last_rank(group);
    if (group.rank() != collector) {
      dist::send(make_tensor({5}, DType::Int64, values_of(group.rank())), collector, group, {.tag = 9});
      return;
    }
    std::set<int> senders;
    for (int message = 0; message + 1 < group.size(); ++message) {
      const Tensor landing = Tensor::zeros({5}, {DType::Int64});
      const int sender = dist::recv_any(landing, group, {.tag = 9});
      INFO("from rank " << sender);
      CHECK(mismatch(landing, DType::Int64, {5}, values_of(sender)) == "");
      senders.insert(sender);
    }
    CHECK(static_cast<int>(senders.size()) == group.size() - 1);
    CHECK(senders.count(collector) == 0);
  });
}

TEST_CASE("dist_ops: batch_isend_irecv exchanges with both neighbours in one batch, into strided views", "[ops]") {
  for_each_group([](const Group& group) {
    const int n = group.size();
    const int me = group.rank();
    const int left = (me + n - 1) % n;
    const int right = (me + 1) % n;
    const Tensor from_left = Tensor::zeros({6}, {DType::Float32});
    const Tensor from_right = transposed_tensor(2, 3, DType::Float32, [](std::int64_t) { return -1.0; });
    const std::vector<P2POp> ops = {
        {P2POp::Kind::Recv, from_left, left, 1},
        {P2POp::Kind::Recv, from_right, right, 2},
        {P2POp::Kind::Send, make_tensor({6}, DType::Float32, values_of(me)), right, 1},
        {P2POp::Kind::Send, transposed_tensor(2, 3, DType::Float32, values_of(me + 100)), left, 2},
    };
    dist::batch_isend_irecv(ops, group)->wait();
    CHECK(mismatch(from_left, DType::Float32, {6}, values_of(left)) == "");
    CHECK(mismatch(from_right, DType::Float32, {2, 3}, through_transpose(2, 3, values_of(right + 100))) == "");
  });
}

TEST_CASE("dist_ops: invalid arguments are InvalidArgument naming the argument, before anything is sent", "[ops]") {
  const Group& world = context().world();
  const int n = world.size();
  const Tensor tensor = make_tensor({2 * n, 3}, DType::Float32, values_of(world.rank()));
  const std::vector<Tensor> too_many(static_cast<std::size_t>(n + 1), tensor);
  const auto rejects = [](auto call, const char* argument) {
    INFO("argument " << argument);
    CHECK_THAT(error_of<InvalidArgument>(call), Catch::Contains(argument));
  };
  rejects([&] { dist::broadcast(tensor, n, world); }, "src");
  rejects([&] { dist::reduce(tensor, -1, world); }, "dst");
  rejects([&] { dist::gather(tensor, n + 3, world); }, "dst");
  rejects([&] { dist::scatter(too_many, n, world); }, "src");
  rejects([&] { dist::all_to_all(too_many, world); }, "inputs");
  rejects([&] { dist::reduce_scatter(too_many, world); }, "inputs");
  rejects([&] { dist::all_reduce(tensor, world, ReduceOp::BitwiseXor); }, "float32");
  rejects([&] { dist::reduce_scatter_tensor(tensor.narrow(0, 0, 2 * n - 1), world); }, "input");
  rejects([&] { dist::all_gather_into_tensor(make_tensor({}, DType::Float32, values_of(1)), world); }, "tensor");
  rejects([&] { dist::all_to_all_single(tensor, world, {{1}, {}}); }, "input_splits");
  const std::vector<std::int64_t> negative_splits(static_cast<std::size_t>(n), -1);
  rejects([&] { dist::all_to_all_single(tensor, world, {{}, negative_splits}); }, "output_splits");
  rejects([&] { dist::send(tensor, n, world); }, "dst");
  rejects([&] { (void)dist::isend(tensor, 0, world, {.tag = dist::kMaxUserTag + 1}); }, "tag");
  rejects([&] { dist::recv(tensor, -5, world); }, "src");
  rejects([&] { (void)dist::irecv(tensor, 0, world, {.tag = -1}); }, "tag");
  rejects([&] { dist::all_gather(Tensor{}, world); }, "tensor");
  const std::vector<P2POp> ops = {{P2POp::Kind::Send, tensor, 0, 0}, {P2POp::Kind::Recv, tensor, n, 0}};
  rejects([&] { (void)dist::batch_isend_irecv(ops, world); }, "ops[1].peer");

  const Group only_rank_0 = context().new_group({0});
  if (world.rank() != 0) rejects([&] { dist::barrier(only_rank_0); }, "member");

  // Nothing was sent: the ranks are still in step and the next collective is exact.
  const Tensor after = make_tensor({4}, DType::Int64, values_of(world.rank()));
  dist::all_reduce(after, world, ReduceOp::Max);
  CHECK(mismatch(after, DType::Int64, {4}, values_of(n - 1)) == "");
}

TEST_CASE("dist_ops: scatter fails on every rank when only the root's input list is wrong", "[ops]") {
  const Group& world = context().world();
  const int root = last_rank(world);
  std::vector<Tensor> inputs;
  if (world.rank() == root) {
    inputs.assign(static_cast<std::size_t>(world.size() + 1), make_tensor({2}, DType::Float32, values_of(root)));
  }
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::scatter(inputs, root, world); }),
             Catch::Contains(world.rank() == root ? "inputs holds" : "root (rank"));
  dist::barrier(world);
}

TEST_CASE("dist_ops: all_to_all_single rejects, on every rank, a peer whose dtype differs", "[ops]") {
  const Group& world = context().world();
  const int odd_one = last_rank(world);
  const DType dtype = world.rank() == odd_one ? DType::Int32 : DType::Int64;
  const Tensor input = make_tensor({world.size(), 2}, dtype, values_of(world.rank()));
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::all_to_all_single(input, world, {{}, {}}); }),
             Catch::Contains("rank") && Catch::Contains("int32"));
  dist::barrier(world);
}

// Asynchronous forms: many operations in flight at once, completed in another order than they were
// issued (and in a different order on different ranks); polling; copy-back and source ranks
// through a Work; wait(timeout) on a receive that nobody has sent yet.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <numeric>
#include <vector>

#include "ops_test_support.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// A check to run once its operation has completed.
struct InFlight {
  const char* name;
  WorkPtr work;
  std::function<void()> check;
};

// Waits for every operation in an order that depends on the rank: reversed on even ranks,
// rotated by the rank on odd ones, so no rank completes them in the order they were issued.
void complete_out_of_order(std::vector<InFlight>& operations, int rank) {
  std::vector<std::size_t> order(operations.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (rank % 2 == 0) {
    std::reverse(order.begin(), order.end());
  } else {
    const std::size_t shift = 1 + static_cast<std::size_t>(rank) % (order.size() - 1);
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shift), order.end());
  }
  for (std::size_t index : order) {
    INFO("waiting for " << operations[index].name);
    operations[index].work->wait();
  }
  for (const InFlight& operation : operations) {
    INFO(operation.name);
    operation.check();
  }
}

// Each starts one operation on `group` and says how to check it. Their order in the test is the
// order every rank posts them.
InFlight all_reduce_in_flight(const Group& group) {
  const Tensor summed = make_tensor({4}, DType::Int64, values_of(group.rank()));
  const ValueAt expected = [n = group.size()](std::int64_t i) {
    return reduced(ReduceOp::Sum, n, true, [i](int r) { return rank_value(r, i); });
  };
  return {"all_reduce", dist::all_reduce_async(summed, group),
          [=] { CHECK(mismatch(summed, DType::Int64, {4}, expected) == ""); }};
}

InFlight all_gather_in_flight(const Group& group) {
  auto gathered = dist::all_gather_async(make_tensor({3}, DType::Float64, values_of(group.rank())), group);
  return {"all_gather", gathered.work, [=] {
            for (std::size_t r = 0; r < gathered.result.size(); ++r) {
              CHECK(mismatch(gathered.result[r], DType::Float64, {3}, values_of(static_cast<int>(r))) == "");
            }
          }};
}

InFlight broadcast_in_flight(const Group& group) {
  const int root = last_rank(group);
  const Tensor broadcasted = make_tensor({2, 3}, DType::Float32, values_of(group.rank())).transpose(0, 1);
  return {"broadcast", dist::broadcast_async(broadcasted, root, group), [=] {
            CHECK(broadcasted.equal(make_tensor({2, 3}, DType::Float32, values_of(root)).transpose(0, 1)));
          }};
}

InFlight irecv_in_flight(const Group& group) {
  const int left = (group.rank() + group.size() - 1) % group.size();
  const Tensor from_left = Tensor::zeros({5}, {DType::Int32});
  return {"irecv", dist::irecv(from_left, left, group, {.tag = 11}),
          [=] { CHECK(mismatch(from_left, DType::Int32, {5}, values_of(left)) == ""); }};
}

InFlight isend_in_flight(const Group& group) {
  const int right = (group.rank() + 1) % group.size();
  return {"isend", dist::isend(make_tensor({5}, DType::Int32, values_of(group.rank())), right, group, {.tag = 11}), [] {}};
}

InFlight variadic_in_flight(const Group& group) {
  const Tensor mine = make_tensor({group.rank() + 1}, DType::Int16, values_of(group.rank()));
  auto gathered = dist::all_gather_variadic_shape_async(mine, group);
  return {"all_gather_variadic_shape", gathered.work, [=] {
            for (std::size_t r = 0; r < gathered.result.size(); ++r) {
              const int rank = static_cast<int>(r);
              CHECK(mismatch(gathered.result[r], DType::Int16, {rank + 1}, values_of(rank)) == "");
            }
          }};
}

InFlight scatter_in_flight(const Group& group) {
  const int root = last_rank(group);
  std::vector<Tensor> inputs;
  if (group.rank() == root) {
    for (int r = 0; r < group.size(); ++r) inputs.push_back(make_tensor({2}, DType::Int64, values_of(r)));
  }
  auto scattered = dist::scatter_async(inputs, root, group);
  return {"scatter", scattered.work,
          [=] { CHECK(mismatch(scattered.result, DType::Int64, {2}, values_of(group.rank())) == ""); }};
}

InFlight reduce_scatter_in_flight(const Group& group) {
  const int me = group.rank();
  const Tensor input = make_tensor({group.size(), 2}, DType::Float64, values_of(me));
  auto block = dist::reduce_scatter_tensor_async(input, group, ReduceOp::Max);
  const ValueAt expected = [me, last = last_rank(group)](std::int64_t i) { return rank_value(last, 2 * me + i); };
  return {"reduce_scatter_tensor", block.work,
          [=] { CHECK(mismatch(block.result, DType::Float64, {1, 2}, expected) == ""); }};
}

// Every rank sends one row to each rank; the output splits are learned in the small round.
InFlight all_to_all_single_in_flight(const Group& group) {
  const int me = group.rank();
  auto exchanged = dist::all_to_all_single_async(make_tensor({group.size(), 1}, DType::Int64, values_of(me)), group);
  const ValueAt expected = [me](std::int64_t i) { return rank_value(static_cast<int>(i), me); };
  return {"all_to_all_single", exchanged.work,
          [=] { CHECK(mismatch(exchanged.result, DType::Int64, {group.size(), 1}, expected) == ""); }};
}

}  // namespace

TEST_CASE("async: many operations in flight at once complete correctly in any order", "[ops]") {
  for_each_group([](const Group& group) {
    std::vector<InFlight> ops;
    ops.push_back(all_reduce_in_flight(group));
    ops.push_back(all_gather_in_flight(group));
    ops.push_back(broadcast_in_flight(group));
    ops.push_back(irecv_in_flight(group));
    ops.push_back(isend_in_flight(group));
    ops.push_back(variadic_in_flight(group));
    ops.push_back(scatter_in_flight(group));
    ops.push_back(reduce_scatter_in_flight(group));
    ops.push_back(all_to_all_single_in_flight(group));
    ops.push_back({"barrier", dist::barrier_async(group), [] {}});
    complete_out_of_order(ops, group.rank());
  });
}

TEST_CASE("async: polling is_completed alone drives an operation to completion", "[ops]") {
  const Group& world = context().world();
  const Tensor tensor = make_tensor({6}, DType::Float64, values_of(world.rank()));
  const WorkPtr work = dist::all_reduce_async(tensor, world, ReduceOp::Min);
  while (!work->is_completed()) {
  }
  CHECK(work->exception() == nullptr);
  CHECK(mismatch(tensor, DType::Float64, {6}, values_of(0)) == "");
}

TEST_CASE("async: Pending::get waits and hands over the allocated outputs", "[ops]") {
  const Group& world = context().world();
  auto pending = dist::all_gather_into_tensor_async(make_tensor({1, 2}, DType::Int32, values_of(world.rank())), world);
  const Tensor& gathered = pending.get();
  CHECK(mismatch(gathered, DType::Int32, {world.size(), 2},
                 [](std::int64_t i) { return rank_value(static_cast<int>(i / 2), i % 2); }) == "");
}

TEST_CASE("async: an irecv from any source into a strided view names its sender", "[ops]") {
  const Group& world = context().world();
  const int collector = 0;
  const int sender = last_rank(world);
  if (world.rank() == sender) dist::send(make_tensor({2, 3}, DType::Float32, values_of(sender)), collector, world, {.tag = 12});
  if (world.rank() == collector) {
    const Tensor landing = Tensor::zeros({3, 2}, {DType::Float32}).transpose(0, 1);
    const WorkPtr work = dist::irecv(landing, kAnySource, world, {.tag = 12});
    work->wait();
    CHECK(work->source_rank() == sender);
    CHECK(mismatch(landing, DType::Float32, {2, 3}, values_of(sender)) == "");
  }
  dist::barrier(world);
}

TEST_CASE("async: wait with a timeout on a receive nobody sent is Timeout, and the receive completes later", "[ops]") {
  const Group& world = context().world();
  const int receiver = 0;
  const int sender = last_rank(world);
  const Tensor landing = Tensor::zeros({4}, {DType::Int64});
  WorkPtr pending;
  if (world.rank() == receiver) {
    pending = dist::irecv(landing, sender, world, {.tag = 13});
    CHECK_THROWS_AS(pending->wait(std::chrono::milliseconds(20)), Timeout);
    CHECK_FALSE(pending->is_completed());
  }
  dist::barrier(world);  // the sender sends only after the receiver's timeout
  if (world.rank() == sender) dist::send(make_tensor({4}, DType::Int64, values_of(sender)), receiver, world, {.tag = 13});
  if (world.rank() == receiver) {
    pending->wait();
    CHECK(mismatch(landing, DType::Int64, {4}, values_of(sender)) == "");
  }
}

// Variadic shapes: every rank contributes a tensor of its own ndim, shape and dtype, which the
// receivers learn in the small round; every element checked on every rank.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "ops_test_support.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

// Rank r's tensor: a different ndim, shape and dtype per rank (rank 3's holds no elements).
struct Contribution {
  DType dtype;
  Shape shape;
};

Contribution contribution_of(int rank) {
  static const DType dtypes[] = {DType::Float32, DType::Int64, DType::UInt8, DType::Float64, DType::Int16};
  static const Shape shapes[] = {{}, {2, 3}, {2, 1, 3}, {0, 4}, {5}};
  return {dtypes[rank % 5], shapes[rank % 5]};
}

// Small enough for uint8, distinct per rank and element, never zero.
ValueAt variadic_values_of(int rank) {
  return [rank](std::int64_t i) { return 10.0 * (rank + 1) + static_cast<double>(i) + 1.0; };
}

// Odd ranks send a strided view, so packing is exercised too.
Tensor tensor_of(int rank) {
  const Contribution c = contribution_of(rank);
  if (rank % 2 == 1 && c.shape.size() == 2) {
    return make_tensor({c.shape[1], c.shape[0]}, c.dtype, variadic_values_of(rank)).transpose(0, 1);
  }
  return make_tensor(c.shape, c.dtype, variadic_values_of(rank));
}

// What rank r's tensor holds, in C order of its shape.
ValueAt expected_values_of(int rank) {
  const Contribution c = contribution_of(rank);
  if (rank % 2 == 1 && c.shape.size() == 2) {
    const std::int64_t rows = c.shape[0];
    const std::int64_t cols = c.shape[1];
    return [=](std::int64_t i) { return variadic_values_of(rank)((i % cols) * rows + i / cols); };
  }
  return variadic_values_of(rank);
}

// Rank `rank`'s contribution, as a view of the one allocation every result shares.
void check_contribution(const Tensor& received, int rank, const Tensor& first_result) {
  const Contribution c = contribution_of(rank);
  CHECK(mismatch(received, c.dtype, c.shape, expected_values_of(rank)) == "");
  CHECK(received.storage() == first_result.storage());
  CHECK(reinterpret_cast<std::uintptr_t>(received.data_ptr()) % 64 == 0);
}

// Rank `src`'s tensor for rank `dst`: shape [src + 1, dst + 1], dtype by the pair.
DType pair_dtype(int src, int dst) {
  static const DType dtypes[] = {DType::Float64, DType::Int32, DType::Float32, DType::Int64};
  return dtypes[(src + dst) % 4];
}

ValueAt pair_values(int src, int dst) {
  return [=](std::int64_t i) { return 100.0 * (src + 1) + 10.0 * dst + static_cast<double>(i) + 1.0; };
}

}  // namespace

TEST_CASE("variadic: all_gather_variadic_shape gathers a different ndim, shape and dtype from every rank", "[ops]") {
  for_each_group([](const Group& group) {
    const std::vector<Tensor> gathered = dist::all_gather_variadic_shape(tensor_of(group.rank()), group);
    check_one_per_rank<Tensor>(gathered, group,
                               [&](const Tensor& from, int rank) { check_contribution(from, rank, gathered[0]); });
  });
}

TEST_CASE("variadic: gather_variadic_shape gives the last rank every rank's tensor and the others nothing", "[ops]") {
  for_each_group([](const Group& group) {
    const int root = last_rank(group);
    const std::vector<Tensor> gathered = dist::gather_variadic_shape(tensor_of(group.rank()), root, group);
    check_gathered<Tensor>(gathered, group, root,
                           [&](const Tensor& from, int rank) { check_contribution(from, rank, gathered[0]); });
  });
}

TEST_CASE("variadic: all_to_all_variadic_shape delivers a tensor of its own shape and dtype for every pair", "[ops]") {
  for_each_group([](const Group& group) {
    const int me = group.rank();
    std::vector<Tensor> inputs;
    for (int p = 0; p < group.size(); ++p) {
      inputs.push_back(make_tensor({me + 1, p + 1}, pair_dtype(me, p), pair_values(me, p)));
    }
    const std::vector<Tensor> received = dist::all_to_all_variadic_shape(inputs, group);
    CHECK(received.size() == inputs.size());
    for (std::size_t r = 0; r < received.size(); ++r) {
      const int src = static_cast<int>(r);
      INFO("from rank " << src);
      CHECK(mismatch(received[r], pair_dtype(src, me), {src + 1, me + 1}, pair_values(src, me)) == "");
    }
  });
}

TEST_CASE("variadic: variadic operations reject bad arguments on every rank before anything is sent", "[ops]") {
  const Group& world = context().world();
  const Shape too_many_dims(17, 1);
  const Tensor deep = make_tensor(too_many_dims, DType::Float32, [](std::int64_t) { return 1.0; });
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::all_gather_variadic_shape(deep, world); }),
             Catch::Contains("17 dimensions"));
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::gather_variadic_shape(tensor_of(0), world.size(), world); }),
             Catch::Contains("dst"));
  const std::vector<Tensor> one_short(static_cast<std::size_t>(world.size() - 1), tensor_of(0));
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::all_to_all_variadic_shape(one_short, world); }),
             Catch::Contains("inputs"));
  // Nothing was sent: the next variadic gather is exact.
  const std::vector<Tensor> gathered = dist::all_gather_variadic_shape(tensor_of(world.rank()), world);
  check_one_per_rank<Tensor>(gathered, world,
                             [&](const Tensor& from, int rank) { check_contribution(from, rank, gathered[0]); });
}

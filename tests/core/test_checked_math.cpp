// Overflow-checked byte arithmetic: products, sums, byte sizes, alignment and view extents give
// their value when it fits and nothing when it would wrap.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/checked_math.hpp"

using namespace tensortree::detail;

TEST_CASE("checked products and sums report overflow instead of wrapping") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  CHECK(checked_mul<std::int64_t>(3, 7) == 21);
  CHECK_FALSE(checked_mul<std::int64_t>(kMax / 2 + 1, 2));
  CHECK(checked_add<std::size_t>(1, 2) == 3);
  CHECK_FALSE(checked_add<std::size_t>(std::numeric_limits<std::size_t>::max(), 1));
}

TEST_CASE("byte sizes are numel times itemsize, refused past 2^63 or for negative dimensions") {
  CHECK(checked_nbytes(std::vector<std::int64_t>{2, 3, 4}, 8) == 192u);
  CHECK(checked_nbytes(std::vector<std::int64_t>{}, 2) == 2u);
  CHECK(checked_nbytes(std::vector<std::int64_t>{0, std::int64_t{1} << 62}, 4) == 0u);
  CHECK_FALSE(checked_nbytes(std::vector<std::int64_t>{std::int64_t{1} << 31, std::int64_t{1} << 31}, 4));
  CHECK_FALSE(checked_nbytes(std::vector<std::int64_t>{4, -1}, 4));
}

TEST_CASE("align-up rounds to the next multiple and refuses to wrap") {
  CHECK(checked_align_up(0) == 0u);
  CHECK(checked_align_up(1) == 64u);
  CHECK(checked_align_up(64) == 64u);
  CHECK(checked_align_up(65) == 128u);
  CHECK(checked_align_up(5000, 4096) == 8192u);
  CHECK_FALSE(checked_align_up(std::numeric_limits<std::uint64_t>::max() - 10));
}

TEST_CASE("a view's extent reaches just past its last element") {
  const std::vector<std::int64_t> shape{2, 3};
  CHECK(view_extent_bytes(shape, std::vector<std::int64_t>{3, 1}, 4) == 24u);
  CHECK(view_extent_bytes(shape, std::vector<std::int64_t>{1, 2}, 4) == 24u);  // transposed
  CHECK(view_extent_bytes(shape, std::vector<std::int64_t>{0, 0}, 8) == 8u);   // broadcast
  CHECK(view_extent_bytes(std::vector<std::int64_t>{0, 5}, std::vector<std::int64_t>{5, 1}, 4) == 0u);
  CHECK_FALSE(view_extent_bytes(shape, std::vector<std::int64_t>{std::int64_t{1} << 62, 1}, 8));
}

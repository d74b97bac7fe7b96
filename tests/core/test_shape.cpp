#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <iterator>
#include <map>
#include <ranges>
#include <span>
#include <sstream>
#include <vector>

#include "tensortree/shape.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;

static_assert(std::ranges::contiguous_range<Shape>);
static_assert(std::is_same_v<Shape::iterator, std::int64_t*>);
static_assert(std::is_same_v<Shape::const_iterator, const std::int64_t*>);

namespace {

// True when `p` points into the bytes of `object` itself (inline storage, no heap block).
template <class T>
bool points_inside(const std::int64_t* p, const T& object) {
  const auto* first = reinterpret_cast<const std::byte*>(&object);
  const auto* at = reinterpret_cast<const std::byte*>(p);
  return at >= first && at < first + sizeof object;
}

}  // namespace

TEST_CASE("Shape keeps up to kInlineDims dimensions inside itself and more on the heap") {
  Shape inline_dims{2, 3, 4, 5, 6};
  REQUIRE(inline_dims.size() == Shape::kInlineDims);
  CHECK(points_inside(inline_dims.data(), inline_dims));
  Shape grown = inline_dims;
  grown.push_back(7);
  CHECK_FALSE(points_inside(grown.data(), grown));
  CHECK(grown == Shape{2, 3, 4, 5, 6, 7});
  // A copy of a grown shape has the same dimensions in storage of its own.
  const Shape copy = grown;
  CHECK(copy == grown);
  CHECK(copy.data() != grown.data());
}

TEST_CASE("Shape is built from braces, counts, iterator pairs, vectors and spans") {
  CHECK(Shape{4, 3}.size() == 2);
  CHECK(Shape{4, 3}[0] == 4);
  CHECK(Shape{4, 3}[1] == 3);
  CHECK(Shape(3, 7) == Shape{7, 7, 7});
  CHECK(Shape(2) == Shape{0, 0});
  CHECK(Shape{}.empty());
  const std::vector<std::int64_t> vec = {5, 6, 7};
  const Shape from_vec = vec;
  CHECK(from_vec == Shape{5, 6, 7});
  const std::array<std::int64_t, 2> arr = {8, 9};
  CHECK(Shape(std::span<const std::int64_t>(arr)) == Shape{8, 9});
  CHECK(Shape(vec.begin() + 1, vec.end()) == Shape{6, 7});
  // Back to a vector, and compared with one.
  const std::vector<std::int64_t> back = from_vec;
  CHECK(back == vec);
  CHECK(from_vec == vec);
  CHECK(from_vec != std::vector<std::int64_t>{5, 6});
}

TEST_CASE("Shape edits like a vector: insert, erase, resize, pop_back") {
  Shape s{1, 2, 3};
  s.insert(s.begin() + 1, 9);
  CHECK(s == Shape{1, 9, 2, 3});
  s.erase(s.begin());
  CHECK(s == Shape{9, 2, 3});
  s.insert(s.end(), {4, 5, 6, 7});  // past the inline capacity
  CHECK(s == Shape{9, 2, 3, 4, 5, 6, 7});
  s.erase(s.begin() + 2, s.begin() + 5);
  CHECK(s == Shape{9, 2, 6, 7});
  s.resize(6, 1);
  CHECK(s == Shape{9, 2, 6, 7, 1, 1});
  s.pop_back();
  CHECK(s.back() == 1);
  CHECK(s.front() == 9);
  CHECK(std::vector<std::int64_t>(s.rbegin(), s.rend()) == std::vector<std::int64_t>{1, 7, 6, 2, 9});
  s.clear();
  CHECK(s.empty());
}

TEST_CASE("Shapes order lexicographically and print as shape_str does") {
  CHECK(Shape{1, 2} < Shape{1, 3});
  CHECK(Shape{1} < Shape{1, 0});
  CHECK_FALSE(Shape{2} < Shape{1, 9});
  std::map<Shape, int> by_shape{{Shape{2, 1}, 1}, {Shape{1, 5}, 2}};
  CHECK(by_shape.begin()->second == 2);
  std::ostringstream text;
  text << Shape{2, 3};
  CHECK(text.str() == "[2, 3]");
}

TEST_CASE("Shape works with the span-based helpers and tensor factories") {
  const Shape shape{2, 3, 4};
  CHECK(numel_of(shape) == 24);
  CHECK(contiguous_strides(shape) == Strides{12, 4, 1});
  CHECK(starts_with(shape, Shape{2, 3}));
  CHECK_FALSE(starts_with(shape, Shape{3}));
  const Tensor t = Tensor::zeros({4, 3});
  CHECK(t.shape() == Shape{4, 3});
  CHECK(t.strides() == Strides{3, 1});
  // A tensor of more dimensions than fit inline keeps them all.
  const Tensor wide = Tensor::arange({1, 2, 1, 2, 1, 2, 1}, 1, 1, {DType::Int32});
  CHECK(wide.shape() == Shape{1, 2, 1, 2, 1, 2, 1});
  CHECK(wide.numel() == 8);
  CHECK(wide.at<std::int32_t>({0, 1, 0, 1, 0, 1, 0}) == 8);
}

TEST_CASE("a moved Shape keeps its dimensions, inline or on the heap, and leaves the source empty") {
  for (const Shape& original : {Shape{3, 4}, Shape{1, 2, 3, 4, 5, 6, 7}}) {
    Shape source = original;
    Shape moved(std::move(source));
    CHECK(moved == original);
    CHECK(source.empty());  // NOLINT(bugprone-use-after-move): the state after a move is specified here
    Shape assigned{9};
    assigned = std::move(moved);
    CHECK(assigned == original);
    CHECK(moved.empty());  // NOLINT(bugprone-use-after-move)
    // The moved-from shape is usable again.
    moved.push_back(5);
    CHECK(moved == Shape{5});
  }
}

// The GPU pack kernel's division of work (core/pack_spans.hpp), checked on the CPU: the chunks that
// blocks 0..n-1 locate tile the buffer exactly, in order, each naming the segment (or gap) its
// bytes belong to, for any mix of tiny, chunk-sized and multi-chunk segments.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "core/pack_spans.hpp"

using namespace tensortree::detail;

namespace {

constexpr std::uint64_t kChunk = kPackChunkBytes;

// Segments laid out as a schema would: 64-byte aligned, in order, with gaps between some.
std::vector<PackSegment> layout(const std::vector<std::uint64_t>& sizes, std::uint64_t& total) {
  std::vector<PackSegment> segments;
  std::uint64_t cursor = 0;
  for (const std::uint64_t size : sizes) {
    segments.push_back({nullptr, cursor, size, -1, 1});
    cursor = (cursor + size + 63) / 64 * 64;
  }
  total = (cursor + 63) / 64 * 64;
  return segments;
}

// Which segment covers each byte of the buffer (-1: none), as the chunks say and as the segments say.
void require_chunks_tile(PackDirection direction, const std::vector<PackSegment>& segments, std::uint64_t total) {
  std::vector<PackSpan> spans;
  const std::uint64_t count = append_pack_spans(direction, segments, total, spans);
  std::vector<std::int64_t> expected(total, -2);  // -2: bytes no chunk may touch
  for (std::size_t i = 0; i < segments.size(); ++i) {
    for (std::uint64_t b = 0; b < segments[i].nbytes; ++b) expected[segments[i].buffer_offset + b] = static_cast<std::int64_t>(i);
  }
  if (direction == PackDirection::Pack) {
    for (std::int64_t& owner : expected) owner = owner == -2 ? -1 : owner;
  }
  std::vector<std::int64_t> covered(total, -2);
  std::uint64_t previous_end = 0;
  for (std::uint64_t chunk = 0; chunk < count; ++chunk) {
    INFO("chunk " << chunk << " of " << count);
    const PackChunk place = locate_chunk(spans.data(), static_cast<std::uint32_t>(spans.size()), chunk);
    REQUIRE(place.nbytes > 0);
    REQUIRE(place.nbytes <= kChunk);
    REQUIRE(place.buffer_offset >= previous_end);
    REQUIRE(place.buffer_offset + place.nbytes <= total);
    previous_end = place.buffer_offset + place.nbytes;
    bool overlaps = false;
    for (std::uint64_t b = place.buffer_offset; b < previous_end; ++b) {
      overlaps = overlaps || covered[b] != -2;
      covered[b] = place.segment;
    }
    REQUIRE_FALSE(overlaps);
  }
  REQUIRE(covered == expected);
}

}  // namespace

TEST_CASE("the pack kernel's chunks tile every segment and gap exactly once, in order") {
  const auto direction = GENERATE(PackDirection::Pack, PackDirection::Unpack);
  std::vector<std::uint64_t> sizes;
  SECTION("one byte") { sizes = {1}; }
  SECTION("exactly a chunk, a chunk and a byte, many chunks") { sizes = {kChunk, kChunk + 1, 7 * kChunk + 13}; }
  SECTION("ten thousand tiny segments") { sizes.assign(10000, 20); }
  SECTION("random sizes") {
    std::mt19937_64 random(25);
    std::uniform_int_distribution<std::uint64_t> size(1, 3 * kChunk);
    sizes.resize(300);
    for (std::uint64_t& s : sizes) s = size(random);
  }
  std::uint64_t total = 0;
  const std::vector<PackSegment> segments = layout(sizes, total);
  require_chunks_tile(direction, segments, total);
}

TEST_CASE("a buffer with no segments is all gap when packing and nothing when unpacking") {
  std::vector<PackSpan> spans;
  CHECK(append_pack_spans(PackDirection::Pack, {}, 3 * kChunk, spans) == 3);
  const PackChunk last = locate_chunk(spans.data(), static_cast<std::uint32_t>(spans.size()), 2);
  CHECK(last.buffer_offset == 2 * kChunk);
  CHECK(last.segment == -1);
  spans.clear();
  CHECK(append_pack_spans(PackDirection::Unpack, {}, 3 * kChunk, spans) == 0);
}

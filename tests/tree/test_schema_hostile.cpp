// Schema::decode on untrusted bytes: every malformed envelope or payload is CorruptData, never a crash
// or a huge allocation (this suite also runs under ASan/UBSan).
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <xxhash.h>

#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"

using namespace tensortree;
using Catch::Matchers::Contains;

namespace {

using Bytes = std::vector<std::byte>;

// Writes payload fields exactly as schema.hpp documents them, independently of the library's encoder.
class PayloadBuilder {
 public:
  PayloadBuilder& u8(std::uint8_t v) { return little(v, 1); }
  PayloadBuilder& u64(std::uint64_t v) { return little(v, 8); }
  PayloadBuilder& text(const std::string& s) {
    u64(s.size());
    for (const char c : s) bytes_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  PayloadBuilder& strings(const std::vector<std::string>& list) {
    u64(list.size());
    for (const std::string& s : list) text(s);
    return *this;
  }
  PayloadBuilder& shape(const Shape& shape) {
    u64(shape.size());
    for (const std::int64_t d : shape) u64(static_cast<std::uint64_t>(d));
    return *this;
  }
  const Bytes& bytes() const { return bytes_; }

 private:
  PayloadBuilder& little(std::uint64_t v, int width) {
    for (int i = 0; i < width; ++i) bytes_.push_back(static_cast<std::byte>(v >> (8 * i)));
    return *this;
  }
  Bytes bytes_;
};

struct RawNode {
  Path path;
  Shape batch_size;
  std::vector<std::string> keys;
};
struct RawLeaf {
  Path path;
  std::uint8_t dtype;
  Shape shape;
  std::uint64_t offset;
  std::uint64_t nbytes;
};
struct RawSchema {
  std::uint8_t device = 0;
  std::uint64_t total_bytes = 0;
  std::vector<RawNode> nodes;
  std::vector<RawLeaf> leaves;
};

constexpr auto kBool = static_cast<std::uint8_t>(DType::Bool);
constexpr auto kFloat32 = static_cast<std::uint8_t>(DType::Float32);
constexpr auto kFloat64 = static_cast<std::uint8_t>(DType::Float64);

// batch [4]: obs float32 [4, 3], next{reward float32 [4], done bool [4]}, in layout order.
RawSchema baseline() {
  return {0,
          192,
          {{{}, {4}, {"obs", "next"}}, {{"next"}, {4}, {"reward", "done"}}},
          {{{"next", "done"}, kBool, {4}, 0, 4},
           {{"next", "reward"}, kFloat32, {4}, 64, 16},
           {{"obs"}, kFloat32, {4, 3}, 128, 48}}};
}

Schema planned_baseline() {
  return Schema::plan({{{}, {4}, {"obs", "next"}}, {{"next"}, {4}, {"reward", "done"}}},
                      {{{"obs"}, DType::Float32, {4, 3}},
                       {{"next", "reward"}, DType::Float32, {4}},
                       {{"next", "done"}, DType::Bool, {4}}},
                      DeviceType::CPU);
}

Bytes payload_of(const RawSchema& raw) {
  PayloadBuilder out;
  out.u8(raw.device).u64(raw.total_bytes).u64(raw.nodes.size());
  for (const RawNode& node : raw.nodes) out.strings(node.path).shape(node.batch_size).strings(node.keys);
  out.u64(raw.leaves.size());
  for (const RawLeaf& leaf : raw.leaves) {
    out.strings(leaf.path).u8(leaf.dtype).shape(leaf.shape).u64(leaf.offset).u64(leaf.nbytes);
  }
  return out.bytes();
}

// A header that vouches for `payload`: right magic, version, length and checksum unless told otherwise.
Bytes seal(const Bytes& payload, std::uint32_t magic = Schema::kMagic, std::uint32_t version = Schema::kFormatVersion) {
  PayloadBuilder header;
  header.u8(magic & 0xFF).u8((magic >> 8) & 0xFF).u8((magic >> 16) & 0xFF).u8(magic >> 24);
  header.u8(version & 0xFF).u8((version >> 8) & 0xFF).u8((version >> 16) & 0xFF).u8(version >> 24);
  header.u64(payload.size()).u64(XXH3_64bits(payload.data(), payload.size()));
  Bytes envelope = header.bytes();
  envelope.insert(envelope.end(), payload.begin(), payload.end());
  return envelope;
}

// What decode's CorruptData says; "decoded" if it accepted the bytes. Any other exception fails the test.
std::string rejection(const Bytes& bytes) {
  try {
    Schema::decode(bytes);
  } catch (const CorruptData& e) {
    return e.what();
  }
  return "decoded";
}

Bytes valid_envelope() {
  std::vector<NodeSpec> nodes = {{{}, {2}, {"f", "n"}}, {{"n"}, {2}, {"a", "b", "empty", "z"}}};
  std::vector<LeafPlan> leaves = {{{"f"}, DType::Float64, {2, 3}},
                                  {{"n", "a"}, DType::Int64, {2}},
                                  {{"n", "b"}, DType::BFloat16, {2, 5}},
                                  {{"n", "empty"}, DType::UInt8, {2, 0}},
                                  {{"n", "z"}, DType::Complex64, {2}}};
  return Schema::plan(nodes, leaves, DeviceType::CUDA).encode();
}

// Either rejected, or a genuinely valid schema whose canonical encoding is these very bytes.
void check_rejected_or_canonical(const Bytes& bytes) {
  std::optional<Schema> decoded;
  try {
    decoded = Schema::decode(bytes);
  } catch (const CorruptData&) {
    return;
  }
  CHECK(decoded->encode() == bytes);
}

}  // namespace

TEST_CASE("the hand-written baseline payload decodes to the schema plan() builds") {
  // Without this, the hostile cases below could pass by rejecting a payload that was never valid.
  CHECK(Schema::decode(seal(payload_of(baseline()))) == planned_baseline());
  CHECK(seal(payload_of(baseline())) == planned_baseline().encode());
}

TEST_CASE("every truncation of a valid envelope is CorruptData") {
  const Bytes envelope = valid_envelope();
  REQUIRE_NOTHROW(Schema::decode(envelope));
  for (std::size_t length = 0; length < envelope.size(); ++length) {
    INFO("length " << length);
    CHECK_THROWS_AS(Schema::decode(std::span(envelope).first(length)), CorruptData);
  }
  Bytes longer = envelope;
  longer.push_back(std::byte{0});
  CHECK_THAT(rejection(longer), Contains("announces a payload of"));
}

TEST_CASE("every truncation of the payload is CorruptData even when resealed with a valid checksum") {
  const Bytes envelope = valid_envelope();
  const Bytes payload(envelope.begin() + Schema::kHeaderBytes, envelope.end());
  for (std::size_t length = 0; length < payload.size(); ++length) {
    INFO("length " << length);
    CHECK(rejection(seal(Bytes(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(length)))) != "decoded");
  }
}

TEST_CASE("every single-byte flip and every single-bit flip of a valid envelope is CorruptData") {
  const Bytes envelope = valid_envelope();
  for (std::size_t at = 0; at < envelope.size(); ++at) {
    for (const unsigned mask : {0xFFU, 0x01U, 0x02U, 0x04U, 0x08U, 0x10U, 0x20U, 0x40U, 0x80U}) {
      Bytes flipped = envelope;
      flipped[at] ^= std::byte(mask);
      INFO("byte " << at << " xor " << mask);
      CHECK_THROWS_AS(Schema::decode(flipped), CorruptData);
    }
  }
}

TEST_CASE("payload bytes flipped and resealed are either rejected or a valid canonical schema") {
  const Bytes envelope = valid_envelope();
  const Bytes payload(envelope.begin() + Schema::kHeaderBytes, envelope.end());
  for (std::size_t at = 0; at < payload.size(); ++at) {
    Bytes flipped = payload;
    flipped[at] ^= std::byte{0xFF};
    INFO("payload byte " << at);
    check_rejected_or_canonical(seal(flipped));
  }
  std::mt19937_64 rng(20240611);
  for (int round = 0; round < 2000; ++round) {
    Bytes mutated = payload;
    for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) {
      mutated[rng() % mutated.size()] = static_cast<std::byte>(rng());
    }
    INFO("round " << round);
    check_rejected_or_canonical(seal(mutated));
  }
}

TEST_CASE("a wrong magic, version or length in the header is CorruptData saying which") {
  const Bytes payload = payload_of(baseline());
  CHECK_THAT(rejection(seal(payload, 0x4E534F4A)), Contains("wrong magic"));
  CHECK_THAT(rejection(seal(payload, Schema::kMagic, 2)), Contains("format version 2"));
  CHECK_THAT(rejection(seal(payload, Schema::kMagic, 0)), Contains("format version 0"));
  Bytes short_payload = seal(payload);
  short_payload.pop_back();
  CHECK_THAT(rejection(short_payload), Contains("announces a payload of"));
  CHECK_THAT(rejection(Bytes(10)), Contains("shorter than its 24-byte header"));
}

TEST_CASE("a payload with trailing bytes after the last leaf is CorruptData") {
  Bytes payload = payload_of(baseline());
  payload.push_back(std::byte{0});
  CHECK_THAT(rejection(seal(payload)), Contains("1 bytes left over"));
}

TEST_CASE("huge counts and lengths are refused before anything is allocated for them") {
  const std::uint64_t huge = std::uint64_t{1} << 40;
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const auto root_prefix = [] { return PayloadBuilder().u8(0).u64(0).u64(1); };  // device, total, 1 node
  struct Case {
    const char* name;
    Bytes payload;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"node count 2^40", PayloadBuilder().u8(0).u64(0).u64(huge).bytes(), "node count 1099511627776 exceeds the limit"},
      {"node count 2^64-1", PayloadBuilder().u8(0).u64(0).u64(max).bytes(), "exceeds the limit"},
      {"node count under the limit but beyond the bytes", PayloadBuilder().u8(0).u64(0).u64(1 << 20).u64(0).bytes(),
       "cannot fit"},
      {"root path depth 2^40", root_prefix().u64(huge).bytes(), "node path depth 1099511627776 exceeds the limit"},
      {"batch_size rank 2^40", root_prefix().u64(0).u64(huge).bytes(), "batch_size rank 1099511627776 exceeds the limit"},
      {"batch_size rank 17", root_prefix().u64(0).u64(17).bytes(), "batch_size rank 17 exceeds the limit of 16"},
      {"node key count 2^40", root_prefix().u64(0).u64(0).u64(huge).bytes(), "node key count 1099511627776 exceeds"},
      {"node key count beyond the bytes", root_prefix().u64(0).u64(0).u64(1000).u64(0).bytes(), "cannot fit"},
      {"key length 2^40", root_prefix().u64(0).u64(0).u64(1).u64(huge).bytes(), "key length 1099511627776 exceeds"},
      {"key length beyond the bytes", root_prefix().u64(0).u64(0).u64(1).u64(4000).u64(0).bytes(), "cannot fit"},
      {"leaf count 2^40", root_prefix().u64(0).u64(0).u64(0).u64(huge).bytes(), "leaf count 1099511627776 exceeds"},
      {"leaf count beyond the bytes", root_prefix().u64(0).u64(0).u64(0).u64(1000).u64(0).bytes(), "cannot fit"},
      {"leaf rank 2^40", root_prefix().u64(0).u64(0).u64(1).text("x").u64(1).u64(1).text("x").u8(kBool).u64(huge).bytes(),
       "leaf rank 1099511627776 exceeds"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Bytes padded = c.payload;
    padded.resize(padded.size() + 64);  // so that a count of one item fits and the huge one is what fails
    CHECK_THAT(rejection(seal(padded)), Contains(c.says));
  }
}

TEST_CASE("hand-made payloads that break a schema invariant are CorruptData naming it") {
  struct Case {
    const char* name;
    std::function<void(RawSchema&)> mutate;
    const char* says;
  };
  const std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();
  const std::vector<Case> cases = {
      {"unknown dtype 17", [](RawSchema& s) { s.leaves[0].dtype = 17; }, "leaf 'next.done' has unknown dtype value 17"},
      {"unknown dtype 255", [](RawSchema& s) { s.leaves[2].dtype = 255; }, "unknown dtype value 255"},
      {"unknown device", [](RawSchema& s) { s.device = 2; }, "unknown storage device kind 2"},
      {"leaf past the end of the buffer", [](RawSchema& s) { s.total_bytes = 128; }, "lies outside the buffer of 128"},
      {"offset far outside", [](RawSchema& s) { s.leaves[2].offset = std::uint64_t{1} << 40; }, "outside the buffer"},
      {"offset + nbytes wraps around", [&](RawSchema& s) { s.leaves[2].offset = u64_max - 63; }, "outside the buffer"},
      {"overlapping leaves", [](RawSchema& s) { s.leaves[1].offset = 0; }, "'next.reward' at offset 0 overlaps"},
      {"misaligned offset", [](RawSchema& s) { s.leaves[1].offset = 65; }, "at offset 65 is not aligned to 64"},
      {"gap between leaves",
       [](RawSchema& s) {
         s.leaves[2].offset = 192;
         s.total_bytes = 256;
       },
       "leaves a gap"},
      {"inflated total_bytes", [](RawSchema& s) { s.total_bytes = std::uint64_t{1} << 50; }, "total_bytes 1125899906842624"},
      {"nbytes that disagrees with the shape", [](RawSchema& s) { s.leaves[2].nbytes = 47; }, "records 47 bytes"},
      {"overflowing shape", [](RawSchema& s) { s.leaves[2].shape = {4, std::int64_t{1} << 61, std::int64_t{1} << 61}; },
       "holds more than 2^63 bytes"},
      {"shape whose byte count overflows only with the itemsize",
       [](RawSchema& s) { s.leaves[2].shape = {4, std::int64_t{1} << 60}; }, "holds more than 2^63 bytes"},
      {"negative dimension", [](RawSchema& s) { s.leaves[2].shape = {4, -12}; }, "negative dimension"},
      {"node batch_size of more than 2^63 elements",
       [](RawSchema& s) { s.nodes[0].batch_size = {std::int64_t{1} << 62, 4}; }, "holds more than 2^63 elements"},
      {"orphan leaf",
       [](RawSchema& s) {
         s.leaves.push_back({{"ghost", "x"}, kFloat64, {}, 192, 8});
         s.total_bytes = 256;
       },
       "leaf 'ghost.x' has no parent node 'ghost'"},
      {"leaf its node does not list", [](RawSchema& s) { s.nodes[0].keys = {"next"}; }, "does not list its child 'obs'"},
      {"key without a child", [](RawSchema& s) { s.nodes[1].keys.push_back("ghost"); }, "lists key 'ghost' but has no such"},
      {"leaves out of layout order",
       [](RawSchema& s) {
         std::swap(s.leaves[0], s.leaves[1]);
         std::swap(s.leaves[0].offset, s.leaves[1].offset);  // each slot stays where a canonical one would be
       },
       "leaf 'next.done' is out of layout order"},
      {"leaf repeated",
       [](RawSchema& s) {
         const RawLeaf repeated = s.leaves[1];
         s.leaves.insert(s.leaves.begin() + 2, repeated);
       },
       "leaf 'next.reward' appears twice"},
      {"one path under two dtypes",
       [](RawSchema& s) {
         s.leaves.push_back({{"obs"}, kFloat64, {4}, 192, 32});
         s.total_bytes = 256;
       },
       "node <root> has two children named 'obs'"},
      {"node repeated", [](RawSchema& s) { s.nodes.push_back(s.nodes[1]); }, "node 'next' is repeated or out of path order"},
      {"no root node", [](RawSchema& s) { s.nodes.erase(s.nodes.begin()); }, "no root node"},
      {"leaf shape not starting with the batch size", [](RawSchema& s) { s.leaves[2].shape = {3, 4}; },
       "does not start with its node's batch_size [4]"},
      {"child batch size not starting with the parent's", [](RawSchema& s) { s.nodes[1].batch_size = {5}; },
       "does not start with its parent's [4]"},
      {"leaf at the root path", [](RawSchema& s) { s.leaves[2].path = {}; }, "empty path"},
  };
  for (const Case& c : cases) {
    RawSchema raw = baseline();
    c.mutate(raw);
    INFO(c.name);
    CHECK_THAT(rejection(seal(payload_of(raw))), Contains(c.says));
  }
}

TEST_CASE("a payload that ends inside a field is CorruptData saying how many bytes were missing") {
  const Bytes payload = payload_of(baseline());
  // Cut inside total_bytes (after the device byte), inside a key's bytes, and inside the last nbytes.
  for (const std::size_t cut : {std::size_t{4}, std::size_t{40}, payload.size() - 3}) {
    INFO("cut at " << cut);
    const std::string why = rejection(seal(Bytes(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(cut))));
    CHECK_THAT(why, Contains("schema payload"));
    CHECK((why.find("ends early") != std::string::npos || why.find("cannot fit") != std::string::npos));
  }
}

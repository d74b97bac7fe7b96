// The schema envelope: a fixed little-endian header around a flat payload of little-endian fields
// (layout in schema.hpp). The payload is written and read field by field with plain copies: an
// archive library's per-object machinery would cost more than the fields themselves, and its
// container loaders reserve whatever count the input claims. Decoding treats the bytes as hostile:
// every read is bounds-checked, and every count is checked against its limit and against the bytes
// left before anything is allocated for it.
#include <array>
#include <cassert>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/endian/conversion.hpp>

#include "core/envelope.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"

namespace tensortree {

namespace {

constexpr detail::EnvelopeFormat kSchemaEnvelope{Schema::kMagic, Schema::kFormatVersion, "schema envelope"};
static_assert(sizeof(detail::EnvelopeHeader) == Schema::kHeaderBytes);

// Smallest wire size of each repeated item, used to bound claimed counts by the bytes left.
constexpr std::size_t kCountBytes = sizeof(std::uint64_t);
constexpr std::size_t kMinNodeBytes = 3 * kCountBytes;  // path, batch_size and keys counts
// path and shape counts, dtype, offset, nbytes
constexpr std::size_t kMinLeafBytes = 2 * kCountBytes + 1 + 2 * sizeof(std::uint64_t);
static_assert(Schema::kMaxEntries < SIZE_MAX / kMinNodeBytes && Schema::kMaxEntries < SIZE_MAX / kMinLeafBytes);

// ---- sizes, so that encode() allocates once ----------------------------------------------------

template <class Keys>
std::size_t strings_bytes(const Keys& list) {
  std::size_t bytes = kCountBytes;
  for (const std::string_view s : list) bytes += kCountBytes + s.size();
  return bytes;
}

std::size_t shape_bytes(const Shape& shape) { return kCountBytes + shape.size() * sizeof(std::int64_t); }

std::size_t payload_bytes(const Schema& schema) {
  std::size_t bytes = 1 + 2 * kCountBytes + kCountBytes;  // device, total_bytes, node count, leaf count
  for (const NodeSpec& node : schema.nodes()) {
    bytes += strings_bytes(node.path) + shape_bytes(node.batch_size) + strings_bytes(node.keys);
  }
  for (std::size_t i = 0; i < schema.leaves().size(); ++i) {
    bytes += strings_bytes(schema.leaf_path(i)) + 1 + shape_bytes(schema.leaves()[i].shape) + 2 * sizeof(std::uint64_t);
  }
  return bytes;
}

// ---- writing -----------------------------------------------------------------------------------

// Writes into space already sized by payload_bytes().
class PayloadWriter {
 public:
  explicit PayloadWriter(std::byte* out) : out_(out) {}

  template <class T>
  void number(T value) {
    const T little = boost::endian::native_to_little(value);
    bytes(&little, sizeof little);
  }
  void text(std::string_view s) {
    number<std::uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  template <class Keys>
  void strings(const Keys& list) {
    number<std::uint64_t>(list.size());
    for (const std::string_view s : list) text(s);
  }
  void shape(const Shape& shape) {
    number<std::uint64_t>(shape.size());
    for (std::size_t d = 0; d < shape.size(); ++d) number<std::int64_t>(shape[d]);
  }
  const std::byte* end() const { return out_; }

 private:
  void bytes(const void* data, std::size_t n) {
    if (n > 0) std::memcpy(out_, data, n);
    out_ += n;
  }

  std::byte* out_;
};

void write_payload(PayloadWriter& out, const Schema& schema) {
  out.number(static_cast<std::uint8_t>(schema.storage_device()));
  out.number(schema.total_bytes());
  out.number<std::uint64_t>(schema.nodes().size());
  for (const NodeSpec& node : schema.nodes()) {
    out.strings(node.path);
    out.shape(node.batch_size);
    out.strings(node.keys);
  }
  out.number<std::uint64_t>(schema.leaves().size());
  for (std::size_t i = 0; i < schema.leaves().size(); ++i) {
    const LeafSpec& leaf = schema.leaves()[i];
    out.strings(schema.leaf_path(i));
    out.number(static_cast<std::uint8_t>(leaf.dtype));
    out.shape(leaf.shape);
    out.number(leaf.offset);
    out.number(leaf.nbytes);
  }
}

// ---- reading -----------------------------------------------------------------------------------

[[noreturn]] void corrupt(const std::string& why) { throw CorruptData(fmt::format("schema payload: {}", why)); }

// Reads the caller's bytes in place; every read checks the bytes left first.
class PayloadReader {
 public:
  explicit PayloadReader(std::span<const std::byte> payload)
      : at_(payload.data()), end_(payload.data() + payload.size()) {}

  template <class T>
  T number() {
    T little{};
    std::memcpy(&little, take(sizeof little), sizeof little);
    return boost::endian::little_to_native(little);
  }
  // A count of items that take at least `min_bytes` each: one beyond `limit` or beyond what the
  // remaining bytes can hold is corrupt, and is refused before anything is allocated for it.
  std::size_t count(const char* what, std::size_t limit, std::size_t min_bytes) {
    const auto n = number<std::uint64_t>();
    if (n > limit) {
      corrupt(fmt::format("{} {} exceeds the limit of {}", what, n, limit));
    }
    // n <= limit <= kMaxEntries, so n * min_bytes cannot overflow (and needs no division).
    if (n * min_bytes > remaining()) {
      corrupt(fmt::format("{} {} cannot fit in the {} bytes left", what, n, remaining()));
    }
    return static_cast<std::size_t>(n);
  }
  std::vector<std::string> strings(const char* what, std::size_t limit) {
    const std::size_t n = count(what, limit, kCountBytes);
    std::vector<std::string> list;
    list.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t length = count("key length", Schema::kMaxKeyBytes, 1);
      list.emplace_back(reinterpret_cast<const char*>(take(length)), length);
    }
    return list;
  }
  // A path's keys, viewed in place in the payload: written into `keys` (room for any allowed depth),
  // returned as the part of it that they fill.
  std::span<const std::string_view> path(const char* what, std::span<std::string_view, Schema::kMaxDepth> keys) {
    const std::size_t n = count(what, Schema::kMaxDepth, kCountBytes);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t length = count("key length", Schema::kMaxKeyBytes, 1);
      keys[i] = {reinterpret_cast<const char*>(take(length)), length};
    }
    return keys.first(n);
  }
  // Into the caller's shape, sized once: no allocation up to DimVector::kInlineDims dimensions.
  void shape(Shape& shape, const char* what) {
    shape.resize(count(what, Schema::kMaxRank, sizeof(std::int64_t)));
    for (std::int64_t& dim : shape) dim = number<std::int64_t>();
  }
  std::size_t remaining() const { return static_cast<std::size_t>(end_ - at_); }

 private:
  const std::byte* take(std::size_t n) {
    if (n > remaining()) {
      corrupt(fmt::format("ends early: {} bytes needed, {} left", n, remaining()));
    }
    const std::byte* first = at_;
    at_ += n;
    return first;
  }

  const std::byte* at_;
  const std::byte* end_;
};

// The fields of a schema as read, before its invariants are checked.
struct SchemaParts {
  DeviceType storage_device = DeviceType::CPU;
  std::uint64_t total_bytes = 0;
  std::vector<NodeSpec> nodes;
  std::vector<LeafSpec> leaves;
  PathList leaf_paths;
};

NodeSpec read_node(PayloadReader& in) {
  NodeSpec node;
  node.path = in.strings("node path depth", Schema::kMaxDepth);
  in.shape(node.batch_size, "batch_size rank");
  node.keys = in.strings("node key count", Schema::kMaxEntries);
  return node;
}

// Reads `count` leaves, their paths straight into one key arena: nothing is allocated per leaf
// (a shape of more than DimVector::kInlineDims dimensions aside).
void read_leaves(PayloadReader& in, std::size_t count, SchemaParts& parts) {
  // Every leaf takes kMinLeafBytes besides its keys, and every key a length field besides its bytes:
  // what is left bounds the keys from above (count() has checked that it cannot go negative), so the
  // list is sized once, from the bytes at hand, and trimmed to what the leaves hold at the end.
  const std::size_t key_room = in.remaining() - count * kMinLeafBytes;
  parts.leaf_paths.reserve(count, key_room / kCountBytes, key_room);
  parts.leaves.resize(count);
  std::array<std::string_view, Schema::kMaxDepth> key_space;
  for (LeafSpec& leaf : parts.leaves) {
    const std::span<const std::string_view> keys = in.path("leaf path depth", key_space);
    const auto dtype = in.number<std::uint8_t>();
    if (!is_valid_dtype(dtype)) {
      corrupt(fmt::format("leaf '{}' has unknown dtype value {}", path_str(Path(keys.begin(), keys.end())), dtype));
    }
    parts.leaf_paths.push_back(keys);
    leaf.dtype = static_cast<DType>(dtype);
    in.shape(leaf.shape, "leaf rank");
    leaf.offset = in.number<std::uint64_t>();
    leaf.nbytes = in.number<std::uint64_t>();
  }
  parts.leaf_paths.shrink_to_fit();
}

SchemaParts read_payload(std::span<const std::byte> payload) {
  PayloadReader in(payload);
  SchemaParts parts;
  const auto device = in.number<std::uint8_t>();
  if (device > static_cast<std::uint8_t>(DeviceType::CUDA)) corrupt(fmt::format("unknown storage device kind {}",
                                                                                device));
  parts.storage_device = static_cast<DeviceType>(device);
  parts.total_bytes = in.number<std::uint64_t>();
  parts.nodes.resize(in.count("node count", Schema::kMaxEntries, kMinNodeBytes));
  for (NodeSpec& node : parts.nodes) node = read_node(in);
  read_leaves(in, in.count("leaf count", Schema::kMaxEntries, kMinLeafBytes), parts);
  if (in.remaining() != 0) corrupt(fmt::format("{} bytes left over after the last leaf", in.remaining()));
  return parts;
}

}  // namespace

std::vector<std::byte> Schema::encode() const {
  const std::size_t header = sizeof(detail::EnvelopeHeader);
  std::vector<std::byte> envelope(header + payload_bytes(*this));
  PayloadWriter out(envelope.data() + header);
  write_payload(out, *this);
  assert(out.end() == envelope.data() + envelope.size());
  detail::stamp_envelope(kSchemaEnvelope, envelope);
  return envelope;
}

Schema Schema::decode(std::span<const std::byte> bytes) {
  const auto payload = detail::open_envelope(kSchemaEnvelope, bytes);
  try {
    SchemaParts parts = read_payload(payload);
    return Schema(std::move(parts.nodes), std::move(parts.leaves), std::move(parts.leaf_paths), parts.total_bytes,
                  parts.storage_device);
  } catch (const InvalidArgument& e) {
    throw CorruptData(fmt::format("schema envelope holds an invalid schema: {}", e.what()));
  }
}

}  // namespace tensortree

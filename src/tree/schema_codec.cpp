// The schema envelope: a fixed little-endian header around a Boost.Serialization binary payload.
// Decoding treats the bytes as hostile: every count is checked against the bytes left before anything
// is allocated, which is why Boost's own std::vector / std::string loaders (they reserve whatever
// count the input claims) are not used here.
#include <cstring>
#include <ios>
#include <span>
#include <streambuf>
#include <string>
#include <vector>

#include <boost/archive/archive_exception.hpp>
#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/endian/buffers.hpp>
#include <boost/endian/conversion.hpp>
#include <xxhash.h>

#include "core/envelope.hpp"
#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"

namespace tensortree {

namespace {

// The envelope carries its own magic and version, so Boost's archive header would only add bytes
// that change with the Boost release.
constexpr unsigned kArchiveFlags = boost::archive::no_header | boost::archive::no_codecvt;

constexpr detail::EnvelopeFormat kSchemaEnvelope{Schema::kMagic, Schema::kFormatVersion, "schema envelope"};
static_assert(sizeof(detail::EnvelopeHeader) == Schema::kHeaderBytes);

// Smallest wire size of each repeated item, used to bound claimed counts by the bytes left.
constexpr std::size_t kCountBytes = sizeof(std::uint64_t);
constexpr std::size_t kMinNodeBytes = 3 * kCountBytes;  // path, batch_size and keys counts
// path and shape counts, dtype, offset, nbytes
constexpr std::size_t kMinLeafBytes = 2 * kCountBytes + 1 + 2 * sizeof(std::uint64_t);

// Appends to the envelope being built.
class AppendStreambuf : public std::streambuf {
 public:
  explicit AppendStreambuf(std::vector<std::byte>& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const auto* first = reinterpret_cast<const std::byte*>(s);
    out_.insert(out_.end(), first, first + n);
    return n;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    out_.push_back(static_cast<std::byte>(traits_type::to_char_type(c)));
    return c;
  }

 private:
  std::vector<std::byte>& out_;
};

// Reads the caller's bytes in place, so the number of bytes left is always exact.
class SpanStreambuf : public std::streambuf {
 public:
  explicit SpanStreambuf(std::span<const std::byte> bytes) {
    // The get area is never written through: the default pbackfail refuses put-backs.
    auto* first = const_cast<char*>(reinterpret_cast<const char*>(bytes.data()));
    setg(first, first, first + bytes.size());
  }
  std::size_t remaining() const { return static_cast<std::size_t>(egptr() - gptr()); }
};

class PayloadWriter {
 public:
  explicit PayloadWriter(std::vector<std::byte>& out) : sink_(out), archive_(sink_, kArchiveFlags) {}

  template <class T>
  void number(T value) {
    const T little = boost::endian::native_to_little(value);
    archive_ << little;
  }
  void text(const std::string& s) {
    number<std::uint64_t>(s.size());
    archive_.save_binary(s.data(), s.size());
  }
  void strings(const std::vector<std::string>& list) {
    number<std::uint64_t>(list.size());
    for (const std::string& s : list) text(s);
  }
  void shape(const Shape& shape) {
    number<std::uint64_t>(shape.size());
    for (const std::int64_t dim : shape) number(dim);
  }

 private:
  AppendStreambuf sink_;
  boost::archive::binary_oarchive archive_;
};

class PayloadReader {
 public:
  explicit PayloadReader(std::span<const std::byte> payload) : source_(payload), archive_(source_, kArchiveFlags) {}

  template <class T>
  T number() {
    T little{};
    archive_ >> little;
    return boost::endian::little_to_native(little);
  }
  // A count of items that take at least `min_bytes` each: one beyond `limit` or beyond what the
  // remaining bytes can hold is corrupt, and is refused before anything is allocated for it.
  std::size_t count(const char* what, std::size_t limit, std::size_t min_bytes) {
    const auto n = number<std::uint64_t>();
    if (n > limit) {
      throw CorruptData(std::string("schema payload: ") + what + " " + std::to_string(n) + " exceeds the limit of " +
                        std::to_string(limit));
    }
    if (n > source_.remaining() / min_bytes) {
      throw CorruptData(std::string("schema payload: ") + what + " " + std::to_string(n) + " cannot fit in the " +
                        std::to_string(source_.remaining()) + " bytes left");
    }
    return static_cast<std::size_t>(n);
  }
  std::string text() {
    std::string s(count("key length", Schema::kMaxKeyBytes, 1), '\0');
    archive_.load_binary(s.data(), s.size());
    return s;
  }
  std::vector<std::string> strings(const char* what, std::size_t limit) {
    std::vector<std::string> list(count(what, limit, kCountBytes));
    for (std::string& s : list) s = text();
    return list;
  }
  Shape shape(const char* what) {
    Shape shape(count(what, Schema::kMaxRank, sizeof(std::int64_t)));
    for (std::int64_t& dim : shape) dim = number<std::int64_t>();
    return shape;
  }
  std::size_t remaining() const { return source_.remaining(); }

 private:
  SpanStreambuf source_;
  boost::archive::binary_iarchive archive_;
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
  for (const LeafSpec& leaf : schema.leaves()) {
    out.strings(leaf.path);
    out.number(static_cast<std::uint8_t>(leaf.dtype));
    out.shape(leaf.shape);
    out.number(leaf.offset);
    out.number(leaf.nbytes);
  }
}

// The fields of a schema as read, before its invariants are checked.
struct SchemaParts {
  DeviceType storage_device = DeviceType::CPU;
  std::uint64_t total_bytes = 0;
  std::vector<NodeSpec> nodes;
  std::vector<LeafSpec> leaves;
};

NodeSpec read_node(PayloadReader& in) {
  NodeSpec node;
  node.path = in.strings("node path depth", Schema::kMaxDepth);
  node.batch_size = in.shape("batch_size rank");
  node.keys = in.strings("node key count", Schema::kMaxEntries);
  return node;
}

LeafSpec read_leaf(PayloadReader& in) {
  LeafSpec leaf;
  leaf.path = in.strings("leaf path depth", Schema::kMaxDepth);
  const auto dtype = in.number<std::uint8_t>();
  if (!is_valid_dtype(dtype)) {
    throw CorruptData("schema payload: leaf '" + path_str(leaf.path) + "' has unknown dtype value " +
                      std::to_string(dtype));
  }
  leaf.dtype = static_cast<DType>(dtype);
  leaf.shape = in.shape("leaf rank");
  leaf.offset = in.number<std::uint64_t>();
  leaf.nbytes = in.number<std::uint64_t>();
  return leaf;
}

SchemaParts read_payload(std::span<const std::byte> payload) {
  PayloadReader in(payload);
  SchemaParts parts;
  const auto device = in.number<std::uint8_t>();
  if (device > static_cast<std::uint8_t>(DeviceType::CUDA)) {
    throw CorruptData("schema payload: unknown storage device kind " + std::to_string(device));
  }
  parts.storage_device = static_cast<DeviceType>(device);
  parts.total_bytes = in.number<std::uint64_t>();
  parts.nodes.resize(in.count("node count", Schema::kMaxEntries, kMinNodeBytes));
  for (NodeSpec& node : parts.nodes) node = read_node(in);
  parts.leaves.resize(in.count("leaf count", Schema::kMaxEntries, kMinLeafBytes));
  for (LeafSpec& leaf : parts.leaves) leaf = read_leaf(in);
  if (in.remaining() != 0) {
    throw CorruptData("schema payload: " + std::to_string(in.remaining()) + " bytes left over after the last leaf");
  }
  return parts;
}


}  // namespace

std::vector<std::byte> Schema::encode() const {
  std::vector<std::byte> envelope(sizeof(detail::EnvelopeHeader));
  {
    PayloadWriter out(envelope);
    write_payload(out, *this);
  }
  detail::stamp_envelope(kSchemaEnvelope, envelope);
  return envelope;
}

Schema Schema::decode(std::span<const std::byte> bytes) {
  const auto payload = detail::open_envelope(kSchemaEnvelope, bytes);
  try {
    SchemaParts parts = read_payload(payload);
    return Schema(std::move(parts.nodes), std::move(parts.leaves), parts.total_bytes, parts.storage_device);
  } catch (const InvalidArgument& e) {
    throw CorruptData(std::string("schema envelope holds an invalid schema: ") + e.what());
  } catch (const boost::archive::archive_exception& e) {
    throw CorruptData(std::string("schema payload ends early or cannot be read: ") + e.what());
  } catch (const std::ios_base::failure& e) {
    throw CorruptData(std::string("schema payload cannot be read: ") + e.what());
  }
}

}  // namespace tensortree

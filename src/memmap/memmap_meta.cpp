#include "memmap/memmap_meta.hpp"

#include <nlohmann/json.hpp>

#include <limits>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/memmap.hpp"
#include "tensortree/schema.hpp"

namespace tensortree {

namespace {

constexpr char kHex[] = "0123456789ABCDEF";

bool needs_escape(unsigned char c) {
  switch (c) {
    case '/': case '<': case '>': case ':': case '"': case '|': case '?': case '*': case '\\':
    case ' ': case '%':
      return true;
    default:
      return c < 0x20 || c == 0x7f;
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

[[noreturn]] void bad_name(std::string_view name, const char* why) {
  throw CorruptData(fmt::format("malformed memmap file name '{}': {}", name, why));
}

}  // namespace

std::string encode_memmap_key(std::string_view key) {
  // "%" alone cannot come out of the escaping below (a real '%' becomes "%25"), so it is free to
  // stand for the empty key; "." and ".." would name the directory itself and its parent.
  if (key.empty()) return "%";
  if (key == ".") return "%2E";
  if (key == "..") return "%2E%2E";
  std::string out;
  out.reserve(key.size());
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (needs_escape(c)) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string decode_memmap_key(std::string_view name) {
  if (name == "%") return {};
  std::string out;
  out.reserve(name.size());
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '/' || c == '\0') bad_name(name, "it holds a '/' or NUL");
    if (c != '%') {
      out += c;
      continue;
    }
    if (i + 2 >= name.size()) {
      bad_name(name, "'%' is not followed by two hex digits");
    }
    const int hi = hex_value(name[i + 1]);
    const int lo = hex_value(name[i + 2]);
    if (hi < 0 || lo < 0) bad_name(name, "'%' is not followed by two hex digits");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

namespace detail {

namespace {

// A plain (map-backed) json: ordered_json finds each key by a linear search, which makes a node
// of many keys quadratic to parse. The key order is taken from the parse instead.
using Json = nlohmann::json;

// TensorDict's meta.json nests three deep (node, entry, shape); far deeper is hostile input, and
// stopping it early keeps every later walk of the document shallow.
constexpr int kMaxJsonDepth = 16;

[[noreturn]] void corrupt(const std::filesystem::path& file, std::string_view where, std::string_view why) {
  const std::string at = where.empty() ? std::string() : fmt::format(" at '{}'", where);
  throw CorruptData(fmt::format("corrupt memmap metadata '{}'{}: {}", file.string(), at, why));
}

[[noreturn]] void unsupported(const std::filesystem::path& file, std::string_view key, std::string_view why) {
  throw NotSupported(fmt::format("memmap metadata '{}' entry '{}': {}", file.string(), key, why));
}

// Python's json.dumps(..., ensure_ascii=True) spelling of one string.
std::string quoted(const std::string& text) {
  try {
    return Json(text).dump(-1, ' ', true);
  } catch (const nlohmann::json::exception&) {
    throw InvalidArgument(fmt::format("memmap key '{}' is not valid UTF-8: meta.json cannot hold it", text));
  }
}

std::string shape_text(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += ']';
  return out;
}

Shape parse_shape(const Json& value, const std::filesystem::path& file, std::string_view where) {
  if (!value.is_array()) corrupt(file, where, "\"shape\" is not a list");
  if (value.size() > Schema::kMaxRank) {
    corrupt(file, where,
            fmt::format("\"shape\" has {} dimensions, at most {} are supported", value.size(), Schema::kMaxRank));
  }
  Shape shape;
  for (const Json& dim : value) {
    if (!dim.is_number_integer()) corrupt(file, where, "\"shape\" holds something other than an integer");
    if (dim.is_number_unsigned() && dim.get<std::uint64_t>() > std::uint64_t{std::numeric_limits<std::int64_t>::max()}) {
      corrupt(file, where, "\"shape\" holds a dimension beyond int64");
    }
    const auto size = dim.get<std::int64_t>();
    if (size < 0) corrupt(file, where, "\"shape\" holds a negative dimension");
    shape.push_back(size);
  }
  return shape;
}

bool is_reserved(const std::string& key) { return key == "shape" || key == "device" || key == "_type"; }

MetaEntry parse_leaf(const std::string& key, const Json& value, const Shape& batch, const std::filesystem::path& file) {
  MetaEntry entry{key, false, DType::Float32, {}};
  if (value.contains("is_nested")) {
    const Json& nested = value["is_nested"];
    if (!nested.is_boolean()) corrupt(file, key, "\"is_nested\" is not a boolean");
    if (nested.get<bool>()) unsupported(file, key, "nested (jagged) tensors have no counterpart in TensorTree");
  }
  if (!value.contains("dtype") || !value["dtype"].is_string()) corrupt(file, key, "no \"dtype\" string");
  const auto& dtype = value["dtype"].get_ref<const std::string&>();
  if (dtype.rfind("torch.", 0) != 0) corrupt(file, key, "\"dtype\" is not of the form \"torch.<name>\"");
  try {
    entry.dtype = parse_dtype(dtype);
  } catch (const InvalidArgument&) {
    corrupt(file, key, fmt::format("unknown dtype \"{}\"", dtype));
  }
  if (value.contains("device") && !value["device"].is_string()) corrupt(file, key, "\"device\" is not a string");
  if (!value.contains("shape")) corrupt(file, key, "no \"shape\"");
  entry.shape = parse_shape(value["shape"], file, key);
  (void)leaf_nbytes(entry.dtype, entry.shape, fmt::format("{}:{}", file.string(), key));
  if (!starts_with(entry.shape, batch)) {
    corrupt(file, key, fmt::format("shape {} does not start with the node's batch size {}", shape_str(entry.shape),
                                   shape_str(batch)));
  }
  return entry;
}

void check_node_fields(const Json& root, const std::filesystem::path& file) {
  if (root.contains("_type")) {
    if (!root["_type"].is_string()) corrupt(file, "_type", "not a string");
    const auto& type = root["_type"].get_ref<const std::string&>();
    if (type != kTensorDictType) {
      unsupported(file, "_type",
                  fmt::format("only TensorDict nodes ({}) can be loaded, not {}", kTensorDictType, type));
    }
  }
  if (root.contains("device") && !root["device"].is_string() && !root["device"].is_null()) {
    corrupt(file, "device", "not a string");
  }
}

}  // namespace

std::uint64_t leaf_nbytes(DType dtype, const Shape& shape, std::string_view what) {
  const std::optional<std::uint64_t> total = checked_nbytes(shape, itemsize(dtype));
  if (!total) {
    throw CorruptData(fmt::format("the byte size of shape {} overflows 64 bits ({})", shape_str(shape), what));
  }
  return *total;
}

std::string leaf_file_name(std::string_view key) {
  std::string name = encode_memmap_key(key);
  name += kMemmapSuffix;
  return name;
}

std::string format_node_meta(const NodeMeta& node) {
  std::string out = "{";
  for (const MetaEntry& entry : node.entries) {
    if (is_reserved(entry.key)) {
      throw InvalidArgument(fmt::format(
          "key '{}' collides with a node field of TensorDict's meta.json (shape, device, _type)", entry.key));
    }
    out += quoted(entry.key);
    if (entry.is_node) {
      out += ": {\"type\": \"TensorDict\"}, ";
      continue;
    }
    out += ": {\"device\": \"cpu\", \"shape\": ";
    out += shape_text(entry.shape);
    out += ", \"dtype\": \"torch.";
    out += dtype_name(entry.dtype);
    out += "\", \"is_nested\": false}, ";
  }
  out += "\"shape\": ";
  out += shape_text(node.batch_size);
  out += ", \"device\": \"cpu\", \"_type\": ";
  out += quoted(std::string(kTensorDictType));
  out += '}';
  return out;
}

// One pass over meta.json's events: bounds the nesting, lists the root object's keys in file order,
// and builds the document from the same events (as json::parse's own builder does, which nlohmann
// keeps out of its API), so the text is parsed once. (nlohmann's parse callback would bound and order too, but its parser removes
// discarded values by rescanning the parent, which is quadratic in the number of keys.)
class MetaScan final : public nlohmann::json_sax<Json> {
 public:
  MetaScan(const std::filesystem::path& file, Json& root) : file_(file), root_(root) {}

  std::vector<std::string> take_keys() { return std::move(keys_); }

  bool null() override { return place(nullptr); }
  bool boolean(bool value) override { return place(value); }
  bool number_integer(number_integer_t value) override { return place(value); }
  bool number_unsigned(number_unsigned_t value) override { return place(value); }
  bool number_float(number_float_t value, const string_t&) override { return place(value); }
  bool string(string_t& value) override { return place(std::move(value)); }
  bool binary(binary_t& value) override { return place(Json::binary(std::move(value))); }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }
  bool key(string_t& key) override {
    if (depth_ == 1) {
      // Python would keep the last of two equal keys; a writer of this format never repeats one.
      if (!seen_.insert(key).second) corrupt(file_, key, "the key appears twice");
      keys_.push_back(key);
    }
    member_ = &(*open_.back())[key];
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const Json::exception& e) override {
    corrupt(file_, "", e.what());
  }

 private:
  bool enter() {
    if (++depth_ > kMaxJsonDepth) corrupt(file_, "", fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    return true;
  }
  // Puts `value` where the document is at: the root, the next element of an array, or the value of
  // the key just read.
  Json* place_at(Json value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    if (open_.back()->is_array()) {
      open_.back()->push_back(std::move(value));
      return &open_.back()->back();
    }
    *member_ = std::move(value);
    return member_;
  }
  bool place(Json value) {
    place_at(std::move(value));
    return true;
  }
  bool open(Json container) {
    enter();
    open_.push_back(place_at(std::move(container)));
    return true;
  }
  bool close() {
    --depth_;
    open_.pop_back();
    return true;
  }

  const std::filesystem::path& file_;
  Json& root_;
  std::vector<Json*> open_;  // the objects and arrays being filled, innermost last
  Json* member_ = nullptr;   // where the value of the key just read goes
  int depth_ = 0;
  std::vector<std::string> keys_;
  std::unordered_set<std::string> seen_;
};

// Parses `text` once (nesting bounded) and lists the root object's keys in file order.
Json parse_bounded(std::string_view text, const std::filesystem::path& file, std::vector<std::string>& keys) {
  Json root;
  MetaScan scan(file, root);
  try {
    Json::sax_parse(text.begin(), text.end(), &scan);
  } catch (const nlohmann::json::exception& e) {
    corrupt(file, "", e.what());
  }
  keys = scan.take_keys();
  return root;
}

NodeMeta parse_node_meta(std::string_view text, const std::filesystem::path& file) {
  std::vector<std::string> keys;
  const Json root = parse_bounded(text, file, keys);
  if (!root.is_object()) corrupt(file, "", "not a JSON object");
  if (!root.contains("shape")) corrupt(file, "", "no \"shape\" (the node's batch size)");
  check_node_fields(root, file);
  NodeMeta node;
  node.batch_size = parse_shape(root["shape"], file, "shape");
  for (const std::string& key : keys) {
    if (is_reserved(key)) continue;
    const Json& value = root.at(key);
    if (!value.is_object()) corrupt(file, key, "the entry is not an object");
    if (value.contains("type")) {
      if (!value["type"].is_string()) corrupt(file, key, "\"type\" is not a string");
      const auto& type = value["type"].get_ref<const std::string&>();
      if (type != "TensorDict") {
        unsupported(file, key,
                    fmt::format("entries of type {} are not supported (only TensorDict nodes and tensors)", type));
      }
      node.entries.push_back({key, true, DType::Float32, {}});
      continue;
    }
    node.entries.push_back(parse_leaf(key, value, node.batch_size, file));
  }
  return node;
}

}  // namespace detail

}  // namespace tensortree

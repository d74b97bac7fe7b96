// TensorTree printing. str() is byte for byte TensorDict's repr except for the class name (Python
// prints type(self).__name__, so this library's type prints its own name, TensorTree); values_str(),
// what operator<< prints, adds every leaf's values as PyTorch prints them.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/tree.hpp"

namespace tensortree {

namespace {

constexpr std::string_view kIndent = "    ";

// textwrap.indent: prefixes every line that holds more than whitespace.
std::string indent(std::string_view text, std::string_view prefix) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t newline = text.find('\n', start);
    const std::size_t end = newline == std::string_view::npos ? text.size() : newline + 1;
    const std::string_view line = text.substr(start, end - start);
    if (line.find_first_not_of(" \t\n\r\f\v") != std::string_view::npos) out += prefix;
    out += line;
    start = end;
  }
  return out;
}

std::string join_lines(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

std::string torch_size(const Shape& shape) { return "torch.Size(" + shape_str(shape) + ")"; }

std::string python_bool(bool value) { return value ? "True" : "False"; }

// PyTorch reports every CUDA tensor as shared.
std::string leaf_repr(const Tensor& leaf) {
  return "Tensor(shape=" + torch_size(leaf.shape()) + ", device=" + leaf.device().str() + ", dtype=torch." +
         std::string(dtype_name(leaf.dtype())) + ", is_shared=" + python_bool(leaf.device().is_cuda()) + ")";
}

}  // namespace

std::string TensorTree::str() const {
  std::vector<std::string> fields;
  fields.reserve(entries_.size());
  for (const Entry& entry : entries_) {
    fields.push_back(entry.key + ": " + (entry.node ? entry.node->str() : leaf_repr(entry.leaf)));
  }
  std::sort(fields.begin(), fields.end());  // TensorDict sorts the printed fields
  const std::optional<Device> common = device();
  // Appended piece by piece: g++ 12 warns falsely on "literal" + std::string&& (-Wrestrict, PR105651).
  std::string field_lines = "\n";
  field_lines += join_lines(fields, ",\n");
  std::string field_block = "fields={";
  field_block += indent(field_lines, kIndent);
  field_block += '}';
  const std::vector<std::string> parts = {
      indent(field_block, kIndent),
      indent("batch_size=" + torch_size(batch_size_), kIndent),
      indent("device=" + (common ? common->str() : std::string("None")), kIndent),
      indent("is_shared=" + python_bool(common && common->is_cuda()), kIndent),
  };
  return "TensorTree(\n" + join_lines(parts, ",\n") + ")";
}

std::string TensorTree::values_str() const {
  const std::optional<Device> common = device();
  std::string out = "TensorTree(batch_size=";
  out += shape_str(batch_size_);
  out += ", device=";
  out += common ? common->str() : std::string("None");
  out += ')';
  for (const Entry& entry : entries_) {
    out += '\n';
    std::string field = entry.key;
    field += ": ";
    // A leaf's later lines keep their alignment under its first line, after the key.
    const std::string value = entry.node ? entry.node->values_str()
                                         : indent(entry.leaf.str(), std::string(field.size(), ' ')).substr(field.size());
    field += value;
    out += indent(field, kIndent);
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const TensorTree& tree) { return os << tree.values_str(); }

}  // namespace tensortree

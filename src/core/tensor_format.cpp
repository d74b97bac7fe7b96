// PyTorch-style printing of tensors: the rules of torch/_tensor_str.py under the default print
// options, so that a tensor reads here exactly as the same tensor reads in Python.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/element_convert.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree {

namespace {

// torch.set_printoptions(profile="default").
constexpr int kPrecision = 4;
constexpr std::int64_t kThreshold = 1000;
constexpr std::int64_t kEdgeItems = 3;
constexpr std::int64_t kLineWidth = 80;
constexpr std::string_view kPrefix = "tensor(";

std::string pad_left(std::string text, std::size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

// Appends pieces in one buffer (also keeps g++ 12 clear of its -Wrestrict false positive on
// `"literal" + std::string`).
std::string concat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out += part;
  return out;
}

std::string spaces(std::int64_t count) { return std::string(static_cast<std::size_t>(count), ' '); }

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

// Positions printed along a dimension of `size`: all of them, or the first and last kEdgeItems
// around a nullopt where PyTorch writes its "..." marker.
std::vector<std::optional<std::int64_t>> printed_positions(std::int64_t size, bool summarize) {
  std::vector<std::optional<std::int64_t>> positions;
  if (summarize && size > 2 * kEdgeItems) {
    for (std::int64_t i = 0; i < kEdgeItems; ++i) positions.emplace_back(i);
    positions.emplace_back(std::nullopt);
    for (std::int64_t i = size - kEdgeItems; i < size; ++i) positions.emplace_back(i);
  } else {
    for (std::int64_t i = 0; i < size; ++i) positions.emplace_back(i);
  }
  return positions;
}

// Python's str(float) spellings of the non-finite values (never "-nan").
std::optional<std::string> non_finite_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  return std::nullopt;
}

// Python's "{:.Nf}" / "{:.Ne}" of a finite value; to_chars rounds the exact binary value as Python
// does, and ignores the locale.
std::string python_format(double value, std::chars_format format, int precision) {
  std::array<char, 400> buffer{};  // the widest fixed-notation double (1.8e308 with decimals) fits
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value, format, precision);
  return std::string(buffer.data(), result.ptr);
}

// PyTorch's _Formatter for one floating component: the notation and the common width come from
// the non-zero finite values that are shown.
class FloatFormatter {
 public:
  FloatFormatter() = default;
  explicit FloatFormatter(const std::vector<double>& shown) {
    std::vector<double> nonzero_finite;
    std::copy_if(shown.begin(), shown.end(), std::back_inserter(nonzero_finite),
                 [](double v) { return std::isfinite(v) && v != 0.0; });
    if (nonzero_finite.empty()) return;
    notation_ = choose_notation(nonzero_finite);
    for (double v : nonzero_finite) width_ = std::max(width_, unpadded(v).size());
  }

  std::size_t width() const { return width_; }
  std::string format(double value) const { return pad_left(unpadded(value), width_); }

 private:
  enum class Notation { Integral, Fixed, Scientific };

  static Notation choose_notation(const std::vector<double>& nonzero_finite) {
    double min_abs = std::abs(nonzero_finite.front());
    double max_abs = min_abs;
    bool integral = true;
    for (double v : nonzero_finite) {
      min_abs = std::min(min_abs, std::abs(v));
      max_abs = std::max(max_abs, std::abs(v));
      integral = integral && v == std::ceil(v);
    }
    const bool wide_range = max_abs / min_abs > 1000.0 || max_abs > 1.0e8;
    if (wide_range || (!integral && min_abs < 1.0e-4)) return Notation::Scientific;
    return integral ? Notation::Integral : Notation::Fixed;
  }

  std::string unpadded(double value) const {
    if (auto text = non_finite_text(value)) return *text;
    switch (notation_) {
      case Notation::Integral: return python_format(value, std::chars_format::fixed, 0) + ".";
      case Notation::Fixed: return python_format(value, std::chars_format::fixed, kPrecision);
      case Notation::Scientific: break;
    }
    return python_format(value, std::chars_format::scientific, kPrecision);
  }

  Notation notation_ = Notation::Integral;
  std::size_t width_ = 1;
};

// Reads elements of a CPU tensor by their offset (in elements, through the strides) from the
// view's first element, so that a strided view prints without a copy.
class ElementReader {
 public:
  explicit ElementReader(const Tensor& cpu)
      : base_(static_cast<const std::byte*>(cpu.data_ptr())),
        dtype_(cpu.dtype()),
        itemsize_(static_cast<std::int64_t>(cpu.itemsize())) {}

  std::complex<double> value(std::int64_t offset) const {
    return detail::load_element(dtype_, address(offset));
  }

  // Python's str() of a bool or integer element, exact for 64-bit values beyond double's range.
  std::string exact_text(std::int64_t offset) const {
    const std::byte* p = address(offset);
    return visit_dtype(dtype_, [p](auto tag) -> std::string {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return detail::load_element<bool>(p).real() != 0.0 ? "True" : "False";
      } else if constexpr (std::is_integral_v<T>) {
        T v;
        std::memcpy(&v, p, sizeof(T));
        return std::to_string(v);
      } else {
        return {};  // only called for bool and integer dtypes
      }
    });
  }

 private:
  const std::byte* address(std::int64_t offset) const {
    return base_ + static_cast<std::ptrdiff_t>(offset * itemsize_);
  }

  const std::byte* base_;
  DType dtype_;
  std::int64_t itemsize_;
};

// Text of one element padded to the width shared by every shown element: exact for bool and
// integers, a FloatFormatter for floats, one for each part of a complex number.
class ElementFormatter {
 public:
  ElementFormatter(ElementReader reader, DType dtype, const std::vector<std::int64_t>& shown)
      : reader_(reader), kind_(kind_of(dtype)) {
    if (kind_ == Kind::Exact) {
      for (std::int64_t i : shown) exact_width_ = std::max(exact_width_, reader_.exact_text(i).size());
      return;
    }
    std::vector<double> reals;
    std::vector<double> imags;
    for (std::int64_t i : shown) {
      const std::complex<double> v = reader_.value(i);
      reals.push_back(v.real());
      imags.push_back(v.imag());
    }
    real_ = FloatFormatter(reals);
    if (kind_ == Kind::Complex) imag_ = FloatFormatter(imags);
  }

  // Characters one element takes in a row, before its ", " separator.
  std::size_t width() const {
    switch (kind_) {
      case Kind::Exact: return exact_width_;
      case Kind::Real: return real_.width();
      case Kind::Complex: break;
    }
    return real_.width() + imag_.width() + 1;  // the "j"
  }

  std::string format(std::int64_t offset) const {
    if (kind_ == Kind::Exact) return pad_left(reader_.exact_text(offset), exact_width_);
    const std::complex<double> v = reader_.value(offset);
    if (kind_ == Kind::Real) return real_.format(v.real());
    return complex_text(v);
  }

 private:
  enum class Kind { Exact, Real, Complex };

  static Kind kind_of(DType dtype) {
    if (is_complex(dtype)) return Kind::Complex;
    return is_floating_point(dtype) ? Kind::Real : Kind::Exact;
  }

  // The imaginary part carries its own sign, or gets a "+" (PyTorch's _val_formatter).
  std::string complex_text(std::complex<double> v) const {
    std::string imag = imag_.format(v.imag()) + "j";
    imag.erase(0, imag.find_first_not_of(' '));
    const bool signed_imag = imag.front() == '+' || imag.front() == '-';
    return real_.format(v.real()) + (signed_imag ? "" : "+") + imag;
  }

  ElementReader reader_;
  Kind kind_;
  std::size_t exact_width_ = 1;
  FloatFormatter real_;
  FloatFormatter imag_;
};

// The bracketed body of a non-empty tensor, laid out as _tensor_str_with_formatter does.
class TensorPrinter {
 public:
  explicit TensorPrinter(Tensor cpu)
      : tensor_(std::move(cpu)),
        shape_(tensor_.shape()),
        strides_(tensor_.strides()),
        summarize_(tensor_.numel() > kThreshold),
        formatter_(ElementReader(tensor_), tensor_.dtype(), shown_elements()) {}

  std::string body() const { return block(0, 0, static_cast<std::int64_t>(kPrefix.size())); }

 private:
  // Offsets of the elements that appear; only they decide notation and width.
  std::vector<std::int64_t> shown_elements() const {
    std::vector<std::int64_t> shown;
    collect_shown(0, 0, shown);
    return shown;
  }

  void collect_shown(std::size_t dim, std::int64_t offset, std::vector<std::int64_t>& shown) const {
    if (dim == shape_.size()) {
      shown.push_back(offset);
      return;
    }
    for (const auto& position : printed_positions(shape_[dim], summarize_)) {
      if (position) collect_shown(dim + 1, offset + *position * strides_[dim], shown);
    }
  }

  std::string block(std::size_t dim, std::int64_t offset, std::int64_t indent) const {
    const std::size_t remaining = shape_.size() - dim;
    if (remaining == 0) return formatter_.format(offset);
    if (remaining == 1) return row(offset, indent);
    return nested(dim, offset, indent);
  }

  // A 1-D run of elements, wrapped so that a line holds as many as fit in kLineWidth.
  std::string row(std::int64_t offset, std::int64_t indent) const {
    const auto element_length = static_cast<std::int64_t>(formatter_.width()) + 2;
    const std::int64_t per_line = std::max<std::int64_t>(1, (kLineWidth - indent) / element_length);
    std::vector<std::string> items;
    for (const auto& position : printed_positions(shape_.back(), summarize_)) {
      items.push_back(position ? formatter_.format(offset + *position * strides_.back()) : " ...");
    }
    const std::string line_break = concat({",\n", spaces(indent + 1)});
    std::string text = "[";
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) text += i % static_cast<std::size_t>(per_line) == 0 ? line_break : ", ";
      text += items[i];
    }
    return text + "]";
  }

  // Sub-blocks one per line, with a blank line more for each dimension beyond the second.
  std::string nested(std::size_t dim, std::int64_t offset, std::int64_t indent) const {
    std::vector<std::string> slices;
    for (const auto& position : printed_positions(shape_[dim], summarize_)) {
      slices.push_back(position ? block(dim + 1, offset + *position * strides_[dim], indent + 1) : "...");
    }
    const std::size_t remaining = shape_.size() - dim;
    const std::string separator = concat({",", std::string(remaining - 1, '\n'), spaces(indent + 1)});
    return concat({"[", join(slices, separator), "]"});
  }

  Tensor tensor_;  // owns the bytes the formatter reads
  const Shape& shape_;
  const Strides& strides_;
  bool summarize_;
  ElementFormatter formatter_;
};

// float32, complex64, int64 and bool go without a dtype suffix (torch.get_default_dtype() and its
// kin).
bool has_default_dtype(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Complex64 || dtype == DType::Int64 ||
         dtype == DType::Bool;
}

// Python's str(tuple(shape)) for the two or more dimensions an empty non-1-D tensor has.
std::string python_tuple(const Shape& shape) {
  std::vector<std::string> sizes;
  for (std::int64_t size : shape) sizes.push_back(std::to_string(size));
  return concat({"(", join(sizes, ", "), ")"});
}

// Suffixes in the order _str_intern appends them.
std::vector<std::string> suffixes_of(const Tensor& tensor) {
  std::vector<std::string> suffixes;
  if (!tensor.device().is_cpu()) suffixes.push_back(concat({"device='", tensor.device().str(), "'"}));
  const std::string dtype_suffix = concat({"dtype=torch.", dtype_name(tensor.dtype())});
  if (tensor.numel() == 0) {
    // An empty tensor shows its shape unless it is 1-D, and its dtype unless float32: no element
    // tells the reader.
    if (tensor.dim() != 1) suffixes.push_back(concat({"size=", python_tuple(tensor.shape())}));
    if (tensor.dtype() != DType::Float32) suffixes.push_back(dtype_suffix);
  } else if (!has_default_dtype(tensor.dtype())) {
    suffixes.push_back(dtype_suffix);
  }
  return suffixes;
}

// PyTorch's _add_suffixes, including its count of the last line's length (two more than the
// characters after the last newline), so that the same suffixes wrap at the same place.
std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes) {
  const std::size_t newline = text.rfind('\n');
  const auto newline_position = newline == std::string::npos ? -1 : static_cast<std::int64_t>(newline);
  std::int64_t last_line_length = static_cast<std::int64_t>(text.size()) - newline_position + 1;
  const auto indent = static_cast<std::int64_t>(kPrefix.size());
  for (const std::string& suffix : suffixes) {
    const auto suffix_length = static_cast<std::int64_t>(suffix.size());
    if (last_line_length + suffix_length + 2 > kLineWidth) {
      text += concat({",\n", spaces(indent), suffix});
      last_line_length = indent + suffix_length;
    } else {
      text += concat({", ", suffix});
      last_line_length += suffix_length + 2;
    }
  }
  return text + ")";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::string body = "[]";
  if (numel() > 0) body = TensorPrinter(to(Device::cpu())).body();
  return add_suffixes(std::string(kPrefix) + body, suffixes_of(*this));
}

}  // namespace tensortree

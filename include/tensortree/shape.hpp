// Shapes and strides (in elements), with overflow-checked arithmetic.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <ostream>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "tensortree/export.hpp"

namespace tensortree {

// The dimensions of one shape or one set of strides. Every tensor view holds two, so they live
// inline up to kInlineDims dimensions: making a view of an ordinary tensor allocates nothing.
// Iterators are plain pointers, so a DimVector is a contiguous range and converts to
// std::span<const std::int64_t>; it also converts from any contiguous range of int64 (a
// std::vector, a span) and back to std::vector.
class DimVector {
 public:
  static constexpr std::size_t kInlineDims = 5;

  using value_type = std::int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = std::int64_t&;
  using const_reference = const std::int64_t&;
  using pointer = std::int64_t*;
  using const_pointer = const std::int64_t*;
  using iterator = std::int64_t*;
  using const_iterator = const std::int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  DimVector() = default;
  // Copies and moves by hand: small_vector's own make GCC 12 warn (-Wstringop-overread,
  // -Warray-bounds) about reading the inline buffer beyond its size wherever a shape is copied or
  // moved. The move is noexcept, so that vectors of tensors move them: only a shape of more than
  // kInlineDims dimensions can need a new block there, and running out of memory for it ends the
  // program.
  DimVector(const DimVector& other) : dims_(other.begin(), other.end()) {}
  DimVector& operator=(const DimVector& other) {
    if (this != &other) dims_.assign(other.begin(), other.end());
    return *this;
  }
  DimVector(DimVector&& other) noexcept { take(other); }
  DimVector& operator=(DimVector&& other) noexcept {
    if (this != &other) {
      dims_.clear();
      take(other);
    }
    return *this;
  }
  explicit DimVector(size_type count, std::int64_t value = 0) : dims_(count, value) {}
  DimVector(std::initializer_list<std::int64_t> dims) : dims_(dims.begin(), dims.end()) {}
  template <std::input_iterator It>
  DimVector(It first, It last) : dims_(first, last) {}
  // Any other contiguous range of int64: std::vector<std::int64_t>, std::span, std::array.
  template <std::ranges::contiguous_range Range>
    requires(std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<Range>>, std::int64_t> &&
             !std::is_same_v<std::remove_cvref_t<Range>, DimVector>)
  DimVector(const Range& dims) : dims_(std::ranges::data(dims), std::ranges::data(dims) + std::ranges::size(dims)) {}

  operator std::vector<std::int64_t>() const { return {begin(), end()}; }
  std::vector<std::int64_t> vec() const { return {begin(), end()}; }

  // ---- element access -------------------------------------------------------------------
  std::int64_t* data() { return dims_.data(); }
  const std::int64_t* data() const { return dims_.data(); }
  std::int64_t& operator[](size_type i) { return dims_[i]; }
  const std::int64_t& operator[](size_type i) const { return dims_[i]; }
  std::int64_t& front() { return dims_.front(); }
  const std::int64_t& front() const { return dims_.front(); }
  std::int64_t& back() { return dims_.back(); }
  const std::int64_t& back() const { return dims_.back(); }

  // ---- iterators ------------------------------------------------------------------------
  iterator begin() { return data(); }
  iterator end() { return data() + size(); }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size(); }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  // ---- size -----------------------------------------------------------------------------
  size_type size() const { return dims_.size(); }
  bool empty() const { return dims_.empty(); }
  void reserve(size_type n) { dims_.reserve(n); }
  void resize(size_type n, std::int64_t value = 0) { dims_.resize(n, value); }
  void clear() { dims_.clear(); }

  // ---- modifiers ------------------------------------------------------------------------
  void push_back(std::int64_t dim) { dims_.push_back(dim); }
  std::int64_t& emplace_back(std::int64_t dim) { return dims_.emplace_back(dim); }
  void pop_back() { dims_.pop_back(); }
  void assign(size_type count, std::int64_t value) { dims_.assign(count, value); }
  template <std::input_iterator It>
  void assign(It first, It last) {
    dims_.assign(first, last);
  }
  iterator insert(const_iterator pos, std::int64_t dim) { return to_pointer(dims_.insert(at(pos), dim)); }
  iterator insert(const_iterator pos, size_type count, std::int64_t dim) {
    return to_pointer(dims_.insert(at(pos), count, dim));
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    return to_pointer(dims_.insert(at(pos), first, last));
  }
  iterator insert(const_iterator pos, std::initializer_list<std::int64_t> dims) {
    return insert(pos, dims.begin(), dims.end());
  }
  iterator erase(const_iterator pos) { return to_pointer(dims_.erase(at(pos))); }
  iterator erase(const_iterator first, const_iterator last) { return to_pointer(dims_.erase(at(first), at(last))); }

  friend bool operator==(const DimVector& a, const DimVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend std::strong_ordering operator<=>(const DimVector& a, const DimVector& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  using Storage = boost::container::small_vector<std::int64_t, kInlineDims>;

  // Copies inline dimensions (no allocation); swaps a heap block. Leaves `other` empty.
  void take(DimVector& other) noexcept {
    if (other.size() > kInlineDims) {
      dims_.swap(other.dims_);
    } else {
      dims_.assign(other.begin(), other.end());
    }
    other.dims_.clear();
  }

  Storage::const_iterator at(const_iterator pos) const { return dims_.cbegin() + (pos - begin()); }
  iterator to_pointer(Storage::iterator it) { return data() + (it - dims_.begin()); }

  Storage dims_;
};

using Shape = DimVector;
using Strides = DimVector;

// Product of the dimensions; InvalidArgument on a negative dimension or int64 overflow.
TT_API std::int64_t numel_of(std::span<const std::int64_t> shape);
// Row-major (C-order) strides for `shape`.
TT_API Strides contiguous_strides(std::span<const std::int64_t> shape);
// "[2, 3]" as used in error messages and reprs.
TT_API std::string shape_str(std::span<const std::int64_t> shape);
// True when `prefix` is a leading part of `shape`.
TT_API bool starts_with(std::span<const std::int64_t> shape, std::span<const std::int64_t> prefix);

// Prints as shape_str does, so that test frameworks and logs show the dimensions.
inline std::ostream& operator<<(std::ostream& os, const DimVector& dims) { return os << shape_str(dims); }

}  // namespace tensortree

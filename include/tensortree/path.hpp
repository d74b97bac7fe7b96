// Key paths into a TensorTree: {"next", "obs"}, also written "next.obs".
#pragma once

#include <compare>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/export.hpp"

namespace tensortree {

using Path = std::vector<std::string>;

// Splits "next.obs" at `sep`; an empty string is the empty path (the root). Empty keys between
// separators are kept ("a..b" is {"a", "", "b"}), so any path written by path_str parses back
// as long as no key contains `sep`.
TT_API Path parse_path(std::string_view text, char sep = '.');
// Joins the keys with `sep`: "next.obs".
TT_API std::string path_str(const Path& path, char sep = '.');

// A path whose keys are slices of one byte string, as a PathList stores them: key i is
// bytes[bounds[i], bounds[i + 1]). Holds pointers only, so it lives no longer than the list it
// views. It has no default (empty) value: {} then names the empty Path in calls that take either.
class TT_API PathView {
 public:
  // Random access over the keys; each is a string_view into the viewed bytes.
  class iterator {
   public:
    using value_type = std::string_view;
    using reference = std::string_view;
    using pointer = void;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::random_access_iterator_tag;
    using iterator_category = std::input_iterator_tag;  // yields values, not references

    iterator() = default;
    iterator(const char* bytes, const std::size_t* bound) : bytes_(bytes), bound_(bound) {}

    std::string_view operator*() const { return {bytes_ + bound_[0], bound_[1] - bound_[0]}; }
    std::string_view operator[](difference_type n) const { return *(*this + n); }
    iterator& operator++() { return ++bound_, *this; }
    iterator operator++(int) { return {bytes_, bound_++}; }
    iterator& operator--() { return --bound_, *this; }
    iterator operator--(int) { return {bytes_, bound_--}; }
    iterator& operator+=(difference_type n) { return bound_ += n, *this; }
    iterator& operator-=(difference_type n) { return bound_ -= n, *this; }
    friend iterator operator+(iterator it, difference_type n) { return it += n; }
    friend iterator operator+(difference_type n, iterator it) { return it += n; }
    friend iterator operator-(iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(iterator a, iterator b) { return a.bound_ - b.bound_; }
    friend bool operator==(iterator a, iterator b) { return a.bound_ == b.bound_; }
    friend auto operator<=>(iterator a, iterator b) { return a.bound_ <=> b.bound_; }

   private:
    const char* bytes_ = nullptr;
    const std::size_t* bound_ = nullptr;
  };

  // `bounds` holds size + 1 offsets into `bytes`, ascending.
  PathView(const char* bytes, const std::size_t* bounds, std::size_t size)
      : bytes_(bytes), bounds_(bounds), size_(size) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view operator[](std::size_t i) const { return begin()[static_cast<std::ptrdiff_t>(i)]; }
  std::string_view back() const { return (*this)[size_ - 1]; }
  iterator begin() const { return {bytes_, bounds_}; }
  iterator end() const { return {bytes_, bounds_ + size_}; }
  // The first n keys: the path of an ancestor (n <= size()).
  PathView first(std::size_t n) const { return {bytes_, bounds_, n}; }
  // An owning copy, for a caller that keeps the path beyond the list or edits it.
  Path to_path() const;

  // Key by key, each key's bytes compared as memcmp does, then the shorter path first: the order
  // of Path's own operator<=>.
  friend bool operator==(PathView a, PathView b) {
    return a.size_ == b.size_ && a.aligned_keys(b) == a.size_ && a.same_bytes(b, a.size_) == 0;
  }
  friend bool operator==(PathView a, const Path& b) { return equal(a, b); }
  // A path's keys are contiguous, and keys of equal lengths at the same positions lie alike in both
  // byte strings: one memcmp over such a leading run orders it as key-by-key compares would. The
  // first pair of keys of different lengths then decides, as they cannot be equal.
  friend std::strong_ordering operator<=>(PathView a, PathView b) {
    const std::size_t run = a.aligned_keys(b);
    if (const int order = a.same_bytes(b, run); order != 0) return order <=> 0;
    if (run < a.size_ && run < b.size_) return a[run] <=> b[run];
    return a.size_ <=> b.size_;
  }
  friend std::strong_ordering operator<=>(PathView a, const Path& b) { return compare(a, b); }

 private:
  std::size_t key_size(std::size_t i) const { return bounds_[i + 1] - bounds_[i]; }
  // How many leading keys of this path and `other` have equal lengths, pairwise.
  std::size_t aligned_keys(PathView other) const {
    const std::size_t n = size_ < other.size_ ? size_ : other.size_;
    std::size_t i = 0;
    while (i < n && key_size(i) == other.key_size(i)) ++i;
    return i;
  }
  // memcmp of the first `keys` keys' bytes, which are as long in both paths.
  int same_bytes(PathView other, std::size_t keys) const {
    const std::size_t length = bounds_[keys] - bounds_[0];
    return length == 0 ? 0 : std::memcmp(bytes_ + bounds_[0], other.bytes_ + other.bounds_[0], length);
  }

  template <class Other>
  static bool equal(PathView a, const Other& b) {
    if (a.size() != b.size()) return false;
    auto key = b.begin();
    for (const std::string_view mine : a) {
      if (mine != std::string_view(*key++)) return false;
    }
    return true;
  }
  template <class Other>
  static std::strong_ordering compare(PathView a, const Other& b) {
    return std::lexicographical_compare_three_way(
        a.begin(), a.end(), b.begin(), b.end(),
        [](std::string_view x, std::string_view y) { return x <=> y; });
  }

  const char* bytes_;
  const std::size_t* bounds_;
  std::size_t size_;
};

TT_API std::string path_str(PathView path, char sep = '.');

// Accepts every way a caller names a path: "next.obs", std::string, {"next", "obs"}, a Path.
class PathRef {
 public:
  PathRef(const char* dotted) : path_(parse_path(dotted)) {}
  PathRef(std::string_view dotted) : path_(parse_path(dotted)) {}
  PathRef(const std::string& dotted) : path_(parse_path(dotted)) {}
  PathRef(std::initializer_list<std::string> keys) : path_(keys) {}
  PathRef(Path path) : path_(std::move(path)) {}
  PathRef(PathView path) : path_(path.to_path()) {}

  const Path& path() const { return path_; }
  operator const Path&() const { return path_; }

 private:
  Path path_;
};

}  // namespace tensortree

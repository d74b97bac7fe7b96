// A few shared values, the most recently used first: the per-thread caches of what the library
// derives from a tree or a schema and reuses while it holds (tree packings, tree recipes). Not
// thread-safe: each thread keeps its own (thread_local).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <iterator>
#include <memory>

namespace tensortree::detail {

template <class T, std::size_t N>
class RecentlyUsed {
 public:
  // The first value that `matches` accepts, moved to the front; null when none does.
  template <class Match>
  std::shared_ptr<const T> find(Match&& matches) {
    for (auto it = values_.begin(); it != values_.end() && *it; ++it) {
      if (matches(**it)) {
        std::rotate(values_.begin(), it, std::next(it));
        return values_.front();
      }
    }
    return nullptr;
  }
  // Puts `value` first; the least recently used goes.
  void add(std::shared_ptr<const T> value) {
    std::rotate(values_.begin(), std::prev(values_.end()), values_.end());
    values_.front() = std::move(value);
  }

 private:
  std::array<std::shared_ptr<const T>, N> values_;
};

}  // namespace tensortree::detail

// TensorTree methods over keys: select, exclude, update, flatten_keys, unflatten_keys.
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"
#include "tree/path_text.hpp"

namespace tensortree {

namespace {

using detail::listed;
using detail::quoted;

std::vector<Path> paths_of(std::initializer_list<PathRef> refs) {
  std::vector<Path> out;
  out.reserve(refs.size());
  for (const PathRef& ref : refs) out.push_back(ref.path());
  return out;
}
}  // namespace

TensorTree TensorTree::filtered(Path& path, const KeepFn& keep) const {
  TensorTree out(batch_size_);
  for (const Entry& entry : entries_) {
    path.push_back(entry.key);
    const Keep decision = keep(path);
    if (decision == Keep::Descend && entry.node) {
      out.append(entry.key, entry.node->filtered(path, keep));
    } else if (decision != Keep::Drop) {
      if (entry.node) {
        out.append(entry.key, TensorTree(*entry.node));
      } else {
        out.append(entry.key, entry.leaf);
      }
    }
    path.pop_back();
  }
  return out;
}

TensorTree TensorTree::select(const std::vector<Path>& paths) const {
  std::set<Path> chosen;
  std::set<Path> on_the_way;
  for (const Path& path : paths) {
    entry_at(path);  // InvalidArgument naming an absent path
    chosen.insert(path);
    for (std::size_t length = 1; length < path.size(); ++length) {
      on_the_way.emplace(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(length));
    }
  }
  Path path;
  return filtered(path, [&](const Path& at) {
    if (chosen.contains(at)) return Keep::Whole;
    return on_the_way.contains(at) ? Keep::Descend : Keep::Drop;
  });
}

TensorTree TensorTree::select(std::initializer_list<PathRef> paths) const { return select(paths_of(paths)); }

TensorTree TensorTree::exclude(const std::vector<Path>& paths) const {
  const std::set<Path> dropped(paths.begin(), paths.end());
  Path path;
  return filtered(path, [&](const Path& at) { return dropped.contains(at) ? Keep::Drop : Keep::Descend; });
}

TensorTree TensorTree::exclude(std::initializer_list<PathRef> paths) const {
  return exclude(paths_of(paths));
}

TensorTree& TensorTree::update(const TensorTree& other) {
  if (&root() == &other.root()) {
    const TensorTree snapshot(other);  // reading and writing one tree at once would see our own writes
    update_from(snapshot);
  } else {
    update_from(other);
  }
  return *this;
}

void TensorTree::update_from(const TensorTree& other) {
  for (const Entry& entry : other.entries_) {
    Entry* mine = find(entry.key);
    if (entry.node && mine && mine->node) {
      mine->node->update_from(*entry.node);
    } else if (entry.node) {
      set(Path{entry.key}, TensorTree(*entry.node));
    } else {
      set(Path{entry.key}, entry.leaf);
    }
  }
}

TensorTree TensorTree::flatten_keys(char sep) const {
  TensorTree out(batch_size_);
  Path path;
  std::unordered_map<std::string, Path> origins;
  flatten_into(out, path, sep, origins);
  return out;
}

void TensorTree::flatten_into(TensorTree& out, Path& path, char sep,
                              std::unordered_map<std::string, Path>& origins) const {
  for (const Entry& entry : entries_) {
    path.push_back(entry.key);
    if (entry.node && !entry.node->empty()) {
      entry.node->flatten_into(out, path, sep, origins);
    } else {
      std::string key = path_str(path, sep);
      const auto [previous, inserted] = origins.emplace(key, path);
      if (!inserted) {
        throw InvalidArgument(fmt::format("flatten_keys: the entries at {} and {} both become key '{}'",
                                          listed(previous->second), listed(path), key));
      }
      if (entry.node) {
        out.append(std::move(key), TensorTree(*entry.node));
      } else {
        out.append(std::move(key), entry.leaf);
      }
    }
    path.pop_back();
  }
}

TensorTree TensorTree::unflatten_keys(char sep) const {
  TensorTree out(batch_size_);
  for (const Entry& entry : entries_) {
    Path path = parse_path(entry.key, sep);
    if (path.empty()) path.push_back(entry.key);  // the empty key stays a key
    for (std::size_t length = 1; length <= path.size(); ++length) {
      const Path prefix(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(length));
      if (out.contains(prefix) && (length == path.size() || out.is_leaf(prefix))) {
        throw InvalidArgument(fmt::format("unflatten_keys: key {} collides with {}{}", describe({entry.key}),
                                          length == path.size() ? "an earlier key at " : "the leaf ", quoted(prefix)));
      }
    }
    if (entry.node) {
      out.set(path, entry.node->unflatten_keys(sep));
    } else {
      out.set(path, entry.leaf);
    }
  }
  return out;
}

}  // namespace tensortree

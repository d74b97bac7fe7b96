#include "transport/in_process/in_process_bootstrap.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// A split round's deposit: color and key.
struct SplitEntry {
  int color = 0;
  int key = 0;
};

}  // namespace

InProcessBootstrap::InProcessBootstrap(std::shared_ptr<InProcessStore> store, int rank)
    : store_(std::move(store)), rank_(rank) {
  if (!store_ || rank_ < 0 || rank_ >= store_->size()) {
    throw InvalidArgument(fmt::format("in-process bootstrap: rank {} outside a group of {}", rank_,
                                      store_ ? store_->size() : 0));
  }
}

std::vector<std::vector<std::byte>> InProcessBootstrap::exchange(const char* operation,
                                                                 std::span<const std::byte> mine) {
  return store_->exchange(rank_, next_round_++, operation, mine);
}

std::vector<std::byte> InProcessBootstrap::all_gather(std::span<const std::byte> mine) {
  const std::vector<std::vector<std::byte>> deposits = exchange("all_gather", mine);
  std::vector<std::byte> all;
  for (std::size_t r = 0; r < deposits.size(); ++r) {
    if (deposits[r].size() != mine.size()) {
      throw InvalidArgument(fmt::format("in-process bootstrap all_gather: rank {} gave {} bytes, rank {} {} (every "
                                        "member must give the same length)", r, deposits[r].size(), rank_,
                                        mine.size()));
    }
    all.insert(all.end(), deposits[r].begin(), deposits[r].end());
  }
  return all;
}

void InProcessBootstrap::broadcast(std::span<std::byte> bytes, int root) {
  if (root < 0 || root >= size()) {
    throw InvalidArgument(fmt::format("in-process bootstrap broadcast: root {} outside a group of {}", root, size()));
  }
  const std::span<const std::byte> mine = rank_ == root ? std::span<const std::byte>(bytes) : std::span<const std::byte>();
  const std::vector<std::byte> sent = exchange("broadcast", mine)[static_cast<std::size_t>(root)];
  if (sent.size() != bytes.size()) {
    throw InvalidArgument(fmt::format("in-process bootstrap broadcast: root {} sent {} bytes into {} on rank {}", root,
                                      sent.size(), bytes.size(), rank_));
  }
  std::copy(sent.begin(), sent.end(), bytes.begin());
}

void InProcessBootstrap::barrier() { exchange("barrier", {}); }

// Members of one color are ranked by key, then by rank; the first of them to ask creates the
// sub-group's store, the others find it by (round, color).
std::unique_ptr<Bootstrap> InProcessBootstrap::split(int color, int key) {
  const std::uint64_t round = next_round_;
  const SplitEntry mine{color, key};
  const std::vector<std::vector<std::byte>> deposits = exchange("split", std::as_bytes(std::span(&mine, 1)));
  if (color < 0) return nullptr;
  std::vector<std::pair<SplitEntry, int>> members;
  for (std::size_t r = 0; r < deposits.size(); ++r) {
    SplitEntry entry;
    std::memcpy(&entry, deposits[r].data(), sizeof entry);
    if (entry.color == color) members.push_back({entry, static_cast<int>(r)});
  }
  std::stable_sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.first.key < b.first.key; });
  const auto position = std::find_if(members.begin(), members.end(), [&](const auto& m) { return m.second == rank_; });
  const int new_rank = static_cast<int>(position - members.begin());
  return std::make_unique<InProcessBootstrap>(store_->child(round, color, static_cast<int>(members.size())), new_rank);
}

std::vector<std::unique_ptr<InProcessBootstrap>> make_in_process_bootstraps(int size,
                                                                             std::chrono::milliseconds timeout) {
  auto store = std::make_shared<InProcessStore>(size, timeout);
  std::vector<std::unique_ptr<InProcessBootstrap>> bootstraps;
  for (int rank = 0; rank < size; ++rank) bootstraps.push_back(std::make_unique<InProcessBootstrap>(store, rank));
  return bootstraps;
}

}  // namespace tensortree::detail

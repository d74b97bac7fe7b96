// An actor's side of weight publication: leases on the newest version (see weight_publisher.cpp for
// the protocol both sides follow) and the copies made under one.
#include <atomic>
#include <cstring>

#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "rl/weights/publication.hpp"
#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/weights.hpp"

namespace tensortree {

using rl::Publication;

struct WeightSubscriber::State {
  WeightSubscriberOptions options;
  Publication publication;
  std::vector<TensorTree> trees;  // per slot, views of its bytes; built once, shared by every lease
  // Where the next search for a free lease word starts (threads may race on it: it is only a hint).
  mutable std::atomic<std::uint32_t> lease_hint{0};

  // The lease word taken for the newest version, validated; nullptr while the publisher is
  // overwriting the slot just read or every lease word is held.
  std::atomic<std::uint64_t>* try_lease(rl::Latest& newest) const;
};

std::atomic<std::uint64_t>* WeightSubscriber::State::try_lease(rl::Latest& newest) const {
  newest = publication.latest();
  std::uint32_t hint = lease_hint.load(std::memory_order_relaxed);
  std::atomic<std::uint64_t>* word = publication.leases().take(newest.slot, rl::this_process(), hint);
  lease_hint.store(hint, std::memory_order_relaxed);
  if (word == nullptr) return nullptr;
  // After the lease store: a claim or another state means the publisher may write the slot.
  if (publication.claim(newest.slot).load() == 0 &&
      publication.state(newest.slot).load() == rl::complete_state(newest.version)) {
    return word;
  }
  word->store(0, std::memory_order_release);
  return nullptr;
}

WeightSubscriber::WeightSubscriber(std::string name, WeightSubscriberOptions options)
    : state_(std::make_shared<State>()) {
  state_->options = options;
  std::string path = rl::publication_path(name);
  rl::OpenFile file = rl::wait_for_publication(path, options.timeout);
  state_->publication = rl::attach_publication(std::move(path), std::move(file), false);
  state_->trees.reserve(state_->publication.slots.size());
  for (const StoragePtr& slot : state_->publication.slots) {
    state_->trees.push_back(TensorTree::from_consolidated(slot, state_->publication.schema));
  }
}

WeightSubscriber::WeightSubscriber(WeightSubscriber&&) noexcept = default;
WeightSubscriber& WeightSubscriber::operator=(WeightSubscriber&&) noexcept = default;
WeightSubscriber::~WeightSubscriber() = default;

WeightLease WeightSubscriber::latest() const {
  rl::Latest newest{};
  std::atomic<std::uint64_t>* word = state_->try_lease(newest);
  if (word == nullptr) {
    detail::wait_bounded([&] { return (word = state_->try_lease(newest)) != nullptr; }, state_->options.timeout, [&] {
      return Timeout(fmt::format("WeightSubscriber::latest of {}: no version could be leased within {} ms ({}; "
                                 "newest version {})",
                                 state_->publication.path, state_->options.timeout.count(),
                                 state_->publication.leases().describe_holders(), newest.version));
    });
  }
  // Shares the subscriber's state: the mapping outlives the subscriber while a lease holds it.
  std::shared_ptr<const TensorTree> tree(state_, &state_->trees[newest.slot]);
  return WeightLease(std::move(tree), word, &state_->publication.state(newest.slot), newest.version);
}

std::uint64_t WeightSubscriber::latest_version() const {
  return rl::decode_latest(state_->publication.header->latest.value.load(std::memory_order_acquire)).version;
}

namespace {

// The second guard: the lease kept the slot still, unless someone wrote the control block by hand.
void check_intact(const WeightLease& lease, const std::string& path) {
  if (!lease.intact()) {
    throw CorruptData(fmt::format("weight publication {}: version {} changed while a lease held it (a tampered "
                                  "control block?)",
                                  path, lease.version()));
  }
}

}  // namespace

std::uint64_t WeightSubscriber::copy_into(const TensorTree& params) const {
  const WeightLease lease = latest();
  params.unpack_from(*lease.tree().storage(), *state_->publication.schema);
  check_intact(lease, state_->publication.path);
  return lease.version();
}

std::pair<std::uint64_t, TensorTree> WeightSubscriber::latest_copy() const {
  const WeightLease lease = latest();
  const Storage& slot = *lease.tree().storage();
  const std::uint64_t bytes = state_->publication.schema->total_bytes();
  StoragePtr copy = Storage::allocate(static_cast<std::size_t>(bytes), slot.device());
  if (slot.device().is_cpu()) {
    std::memcpy(copy->data(), slot.data(), static_cast<std::size_t>(bytes));
  } else {
    cuda::copy_bytes(copy->data(), slot.data(), static_cast<std::size_t>(bytes));
  }
  check_intact(lease, state_->publication.path);
  return {lease.version(), TensorTree::from_consolidated(std::move(copy), state_->publication.schema)};
}

// ---- WeightLease ----------------------------------------------------------------------------------

WeightLease::WeightLease(WeightLease&& other) noexcept
    : tree_(std::move(other.tree_)),
      entry_(std::exchange(other.entry_, nullptr)),
      slot_state_(std::exchange(other.slot_state_, nullptr)),
      version_(std::exchange(other.version_, 0)) {}

WeightLease& WeightLease::operator=(WeightLease&& other) noexcept {
  if (this != &other) {
    release();
    tree_ = std::move(other.tree_);
    entry_ = std::exchange(other.entry_, nullptr);
    slot_state_ = std::exchange(other.slot_state_, nullptr);
    version_ = std::exchange(other.version_, 0);
  }
  return *this;
}

WeightLease::~WeightLease() { release(); }

const TensorTree& WeightLease::tree() const {
  if (!held()) throw InvalidArgument("WeightLease::tree: the lease holds no version (released or moved from)");
  return *tree_;
}

bool WeightLease::intact() const {
  return held() &&
         static_cast<const std::atomic<std::uint64_t>*>(slot_state_)->load(std::memory_order_acquire) ==
             rl::complete_state(version_);
}

void WeightLease::release() noexcept {
  if (entry_ == nullptr) return;
  static_cast<std::atomic<std::uint64_t>*>(entry_)->store(0, std::memory_order_release);
  entry_ = nullptr;
  slot_state_ = nullptr;
  tree_.reset();
}

}  // namespace tensortree

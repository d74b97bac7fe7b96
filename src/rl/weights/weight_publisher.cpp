// The learner's side of weight publication. A publish claims a slot that is neither the newest
// nor pinned by a live reader, gathers the tree's leaves straight into it, and then makes it the
// newest version:
//   claim = 1 (seq_cst); scan the lease words -> a live lease on the slot: claim = 0, try another
//   state = odd; gather; state = 2 * version (release); claim = 0; latest = version | slot
// A reader stores its lease word (seq_cst) and then checks claim == 0 and state == 2 * version, so
// either the publisher sees the lease or the reader sees the claim (or the new state) and retries.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "rl/shared_memory_name.hpp"
#include "rl/weights/publication.hpp"
#include "rl/weights/slot_memory.hpp"
#include "tensortree/error.hpp"
#include "tensortree/weights.hpp"
#include "tree/consolidation_access.hpp"
#include "tree/layout_difference.hpp"

namespace tensortree {

using rl::Publication;

struct WeightPublisher::State {
  std::string path;
  WeightPublisherOptions options;
  std::optional<Publication> publication;  // none until the first publish (or an existing one reopened)
  std::uint64_t version = 0;

  void create(const detail::WalkedTree& walked, std::uint64_t first_version);
  void check_layout(const Schema& offered) const;
  std::optional<std::uint32_t> try_claim() const;
  std::uint32_t claim_slot() const;
  detail::WalkedTree walk(const TensorTree& params) const;
};

namespace {

void check_options(const WeightPublisherOptions& options) {
  if (options.slots < rl::kMinSlots || options.slots > rl::kMaxSlots) {
    throw InvalidArgument(fmt::format("WeightPublisher: {} slots, expected {} to {}", options.slots, rl::kMinSlots,
                                      rl::kMaxSlots));
  }
  if (options.max_leases == 0 || options.max_leases > rl::kMaxLeases) {
    throw InvalidArgument(fmt::format("WeightPublisher: {} lease words, expected 1 to {}", options.max_leases,
                                      rl::kMaxLeases));
  }
}

rl::LayoutRequest request_for(const WeightPublisherOptions& options, const Schema& schema, Device device,
                              std::uint64_t schema_bytes) {
  return {options.slots,
          options.max_leases,
          device.is_cuda() ? rl::SlotMemory::Cuda : rl::SlotMemory::Host,
          device.is_cuda() ? device.index() : -1,
          schema.total_bytes(),
          schema_bytes,
          schema.fingerprint()};
}

// Gathers the leaves straight into `slot` and makes it the newest version.
void write_slot(const Publication& p, const detail::WalkedTree& walked, std::uint32_t slot,
                std::uint64_t new_version, int threads) {
  p.state(slot).store(rl::writing_state(new_version));
  detail::pack_walked(walked, {.threads = threads, .reuse = p.slots[slot]});
  p.state(slot).store(rl::complete_state(new_version), std::memory_order_release);
  p.claim(slot).store(0, std::memory_order_release);
  p.header->latest.value.store(rl::encode_latest(new_version, slot));
}

}  // namespace

detail::WalkedTree WeightPublisher::State::walk(const TensorTree& params) const {
  ConsolidateOptions target;
  if (publication) {
    target.device = publication->slots.front()->device();
  } else {
    target.device = options.device;
  }
  return detail::walk_for_packing(params, target, "WeightPublisher::publish");
}

void WeightPublisher::State::create(const detail::WalkedTree& walked, std::uint64_t first_version) {
  const Schema& schema = *walked.plan->schema;
  const std::vector<std::byte> schema_bytes = schema.encode();
  const rl::FixedHeader fixed = rl::plan_layout(request_for(options, schema, walked.target, schema_bytes.size()));
  if (options.replace) ::unlink(path.c_str());
  rl::NewPublicationFile file(path, fixed.file_bytes);
  Publication created;
  created.path = path;
  created.fixed = fixed;
  created.schema = walked.plan->schema;
  created.file.fd = detail::FileDescriptor(::dup(file.fd()));
  if (!created.file.fd.valid()) throw BackendError(fmt::format("dup of the descriptor of {} failed", path));
  created.file.bytes = fixed.file_bytes;
  rl::map_publication(created, true);
  if (walked.target.is_cuda()) {
    rl::DeviceSlots device = rl::allocate_device_slots(fixed);
    created.slots = std::move(device.slots);
    std::memcpy(created.fixed.ipc_handle.data(), device.handle.data(), device.handle.size());
    created.fixed.ipc_bytes = device.bytes;
  }
  std::memcpy(&created.header->fixed, &created.fixed, sizeof created.fixed);
  std::memcpy(created.control->data() + fixed.schema_offset, schema_bytes.data(), schema_bytes.size());
  write_slot(created, walked, 0, first_version, options.threads);
  // Readers see the file only now, whole and holding its first version.
  file.commit();
  publication = std::move(created);
}

void WeightPublisher::State::check_layout(const Schema& offered) const {
  const Schema& published = *publication->schema;
  if (offered.fingerprint() == published.fingerprint()) return;
  std::string difference = detail::difference_text(offered, published, "in the publication");
  if (difference.empty()) {
    difference = fmt::format("layout {:#018x} here, {:#018x} in the publication", offered.fingerprint(),
                             published.fingerprint());
  }
  throw SchemaMismatch(fmt::format("WeightPublisher::publish to {}: the tree does not fit the layout its first "
                                   "publish fixed, {}", path, difference));
}

std::optional<std::uint32_t> WeightPublisher::State::try_claim() const {
  const Publication& p = *publication;
  const std::uint32_t newest = p.latest().slot;
  std::array<std::uint32_t, rl::kMaxSlots> candidates{};
  std::uint32_t count = 0;
  for (std::uint32_t k = 0; k < p.fixed.slot_count; ++k) {
    if (k != newest) candidates[count++] = k;
  }
  // The oldest version first: it is the one a reader is least likely to want.
  std::sort(candidates.begin(), candidates.begin() + count, [&](std::uint32_t a, std::uint32_t b) {
    return p.state(a).load(std::memory_order_relaxed) < p.state(b).load(std::memory_order_relaxed);
  });
  const rl::LeaseTable leases = p.leases();
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t k = candidates[i];
    p.claim(k).store(1);
    if (!leases.pinned_by_live_reader(k)) return k;
    p.claim(k).store(0);
  }
  return std::nullopt;
}

std::uint32_t WeightPublisher::State::claim_slot() const {
  std::optional<std::uint32_t> slot;
  detail::wait_bounded([&] { return (slot = try_claim()).has_value(); }, options.timeout, [&] {
    return Timeout(fmt::format("WeightPublisher::publish to {}: live readers held every slot but the newest for "
                               "{} ms ({})",
                               path, options.timeout.count(), publication->leases().describe_holders()));
  });
  return *slot;
}

std::filesystem::path WeightPublisher::shared_memory_path(std::string_view name) {
  return rl::shared_memory_path(rl::kWeightsKind, name, "WeightPublisher::shared_memory_path");
}

WeightPublisher::WeightPublisher(std::string name, WeightPublisherOptions options)
    : state_(std::make_unique<State>()) {
  check_options(options);
  state_->path = rl::publication_path(name);
  state_->options = options;
  if (options.replace) return;
  std::optional<rl::OpenFile> existing = rl::open_publication(state_->path);
  if (!existing) return;
  rl::lock_as_publisher(existing->fd.get(), state_->path);
  state_->publication = rl::attach_publication(state_->path, std::move(*existing), true);
  state_->version = state_->publication->latest().version;
}

WeightPublisher::WeightPublisher(WeightPublisher&&) noexcept = default;
WeightPublisher& WeightPublisher::operator=(WeightPublisher&& other) noexcept {
  if (this != &other) {
    const WeightPublisher replaced(std::move(*this));  // its destructor removes what it published
    state_ = std::move(other.state_);
  }
  return *this;
}

WeightPublisher::~WeightPublisher() {
  if (!state_ || !state_->publication || !state_->options.unlink_on_close) return;
  // Only our own file: a publisher started with `replace` may have put a new one under the name.
  struct stat ours {}, named {};
  if (::fstat(state_->publication->file.fd.get(), &ours) == 0 && ::stat(state_->path.c_str(), &named) == 0 &&
      ours.st_ino == named.st_ino && ours.st_dev == named.st_dev) {
    ::unlink(state_->path.c_str());
  }
}

std::uint64_t WeightPublisher::publish(const TensorTree& params) { return publish(params, state_->version + 1); }

std::uint64_t WeightPublisher::publish(const TensorTree& params, std::uint64_t version) {
  if (version <= state_->version || version > rl::kMaxVersion) {
    throw InvalidArgument(fmt::format("WeightPublisher::publish to {}: version {} must be above the last one, {}, "
                                      "and at most {}",
                                      state_->path, version, state_->version, rl::kMaxVersion));
  }
  const detail::WalkedTree walked = state_->walk(params);
  if (!state_->publication) {
    state_->create(walked, version);
  } else {
    state_->check_layout(*walked.plan->schema);
    write_slot(*state_->publication, walked, state_->claim_slot(), version, state_->options.threads);
  }
  state_->version = version;
  return version;
}

std::uint64_t WeightPublisher::version() const { return state_->version; }

const std::string& WeightPublisher::path() const { return state_->path; }

}  // namespace tensortree

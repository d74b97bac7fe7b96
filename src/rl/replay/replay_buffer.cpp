#include "tensortree/replay_buffer.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>

#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "rl/replay/checkpoint.hpp"
#include "rl/replay/created_directory.hpp"
#include "rl/replay/fs_errors.hpp"
#include "rl/replay/priority_trees.hpp"
#include "rl/replay/rate_limiter.hpp"
#include "rl/replay/replay_state.hpp"
#include "rl/shared_memory_name.hpp"
#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"

namespace tensortree {

namespace fs = std::filesystem;

namespace {

std::uint64_t seed_of(const ReplayOpenOptions& options) {
  if (options.seed != 0) return options.seed;
  const auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32) ^ now;
}

detail::LayoutState checked_layout_state(const detail::ControlBlock& control) {
  const std::uint32_t raw = std::atomic_ref(control.header().layout_state).load(std::memory_order_acquire);
  if (raw != static_cast<std::uint32_t>(detail::LayoutState::None) &&
      raw != static_cast<std::uint32_t>(detail::LayoutState::Ready)) {
    throw CorruptData(fmt::format("replay control block '{}' has layout state {}", control.file().string(), raw));
  }
  return static_cast<detail::LayoutState>(raw);
}

bool reusable(const StoragePtr& buffer, std::uint64_t bytes, Device device) {
  return buffer && buffer->nbytes() >= bytes && buffer->device().type() == device.type() &&
         (device.is_cpu() || device.index() < 0 || buffer->device() == device);
}

// Where a sample gathers: the caller's buffer, a new one, or (for a GPU) this handle's pinned staging.
StoragePtr host_buffer(ReplayBuffer::State& s, std::uint64_t bytes, const SampleOptions& options) {
  if (options.device.is_cuda()) {
    if (!s.staging || s.staging->nbytes() < bytes) s.staging = Storage::allocate(bytes, Device::cpu(), true);
    return s.staging;
  }
  if (reusable(options.reuse, bytes, options.device)) return options.reuse;
  // A learner that drops each batch before it samples the next gets the same pages back: no
  // allocation and no page faults. use_count() == 1: only this handle holds it, and only this
  // thread could hand it out again.
  if (s.recycled && s.recycled.use_count() == 1 && s.recycled->nbytes() >= bytes && s.recycled->nbytes() <= 2 * bytes) {
    return s.recycled;
  }
  s.recycled = Storage::allocate(bytes, Device::cpu());
  return s.recycled;
}

// One upload of the whole gathered batch (into the caller's device buffer when it fits).
StoragePtr upload(const StoragePtr& staging, std::uint64_t bytes, const SampleOptions& options) {
  const Tensor staged(staging, 0, DType::UInt8, Shape{static_cast<std::int64_t>(bytes)}, Strides{1});
  if (!reusable(options.reuse, bytes, options.device)) return staged.to(options.device).storage();
  const Tensor target(options.reuse, 0, DType::UInt8, Shape{static_cast<std::int64_t>(bytes)}, Strides{1});
  target.copy_(staged);
  return options.reuse;
}

}  // namespace

ReplayBuffer::State::State(fs::path dir_, const ReplayOpenOptions& options_, detail::ControlBlock control_)
    : dir(std::move(dir_)),
      options(options_),
      control(std::move(control_)),
      sampler(detail::make_sampler(options, control)),
      rng(seed_of(options)) {
  if (options.timeout.count() < 0) {
    throw InvalidArgument(fmt::format("ReplayBuffer: timeout {} ms is negative", options.timeout.count()));
  }
}

bool ReplayBuffer::State::find_rows() {
  if (store) return true;
  if (checked_layout_state(control) != detail::LayoutState::Ready) return false;
  store.emplace(detail::RowStore::open(dir, control));
  return true;
}

ReplayBuffer::ReplayBuffer(std::unique_ptr<State> state) : state_(std::move(state)) {}
ReplayBuffer::ReplayBuffer(ReplayBuffer&& other) noexcept = default;
ReplayBuffer& ReplayBuffer::operator=(ReplayBuffer&& other) noexcept = default;
ReplayBuffer::~ReplayBuffer() = default;

ReplayBuffer ReplayBuffer::create(const fs::path& dir, const ReplayBufferOptions& options,
                                  const ReplayOpenOptions& open_options) {
  detail::CreatedDirectory created(dir);
  ReplayBufferOptions fixed = options;
  // Asking for the Prioritized sampler is asking for priorities: one setting is enough.
  if (open_options.sampler == SamplerKind::Prioritized) fixed.prioritized = true;
  detail::ControlBlock control = detail::ControlBlock::create(dir, fixed);
  created.wrote(control.file());
  auto state = std::make_unique<State>(dir, open_options, std::move(control));
  created.keep();
  return ReplayBuffer(std::move(state));
}

ReplayBuffer ReplayBuffer::open(const fs::path& dir, const ReplayOpenOptions& options) {
  auto state = std::make_unique<State>(dir, options, detail::ControlBlock::open(dir));
  state->find_rows();  // a damaged data directory is reported here, not at the first sample
  return ReplayBuffer(std::move(state));
}

fs::path ReplayBuffer::shared_memory_path(std::string_view name) {
  return rl::shared_memory_path(rl::kReplayKind, name, "ReplayBuffer::shared_memory_path");
}

void ReplayBuffer::extend(const TensorTree& rows) {
  State& s = *state_;
  if (!s.find_rows()) {
    s.store.emplace(detail::with_typed_fs_errors("ReplayBuffer::extend", [&] {
      return detail::RowStore::create_or_open(s.dir, s.control, rows, s.options.timeout);
    }));
  }
  s.writer.extend(rows, s.control, *s.store, s.options.timeout);
}

ReplaySample ReplayBuffer::sample(std::int64_t n, const SampleOptions& options) {
  State& s = *state_;
  if (n <= 0) throw InvalidArgument(fmt::format("ReplayBuffer::sample: {} rows asked for", n));
  detail::wait_bounded([&] { return s.find_rows(); }, s.options.timeout, [&] {
    return Timeout(fmt::format("ReplayBuffer::sample: no row was inserted into '{}' within {} ms (the handle's "
                               "wait, ReplayOpenOptions::timeout)",
                               s.dir.string(), s.options.timeout.count()));
  });
  if (s.options.sampler == SamplerKind::WithoutReplacement && n > size()) {
    throw InvalidArgument(fmt::format("ReplayBuffer::sample: {} rows without replacement from {} present", n, size()));
  }
  detail::SampleReservation reservation(s.control, static_cast<std::uint64_t>(n), s.options.timeout);
  const std::int64_t present = size();
  const detail::SamplerContext context{s.control, *s.store, s.rng, s.options, std::max<std::int64_t>(present, 1)};
  s.sampler->draw(context, n, s.units);

  const auto host_schema = s.store->layout().batch_schema(n, DeviceType::CPU);
  StoragePtr host = host_buffer(s, host_schema->total_bytes(), options);
  ReplaySample out;
  s.gather.gather(context, *s.sampler, s.units, *host_schema, host->data(), out.indices);
  s.sampler->weights(context, out.indices, out.weights);
  out.batch = options.device.is_cuda()
                  ? TensorTree::from_consolidated(upload(host, host_schema->total_bytes(), options),
                                                  s.store->layout().batch_schema(n, DeviceType::CUDA))
                  : TensorTree::from_consolidated(std::move(host), host_schema);
  reservation.commit();
  return out;
}

void ReplayBuffer::update_priority(std::span<const std::int64_t> indices, std::span<const double> priorities) {
  const State& s = *state_;
  if (s.control.tree_leaves() == 0) {
    throw InvalidArgument(fmt::format("ReplayBuffer::update_priority: '{}' was created without priorities "
                                      "(create it with .prioritized = true or the Prioritized sampler)",
                                      s.dir.string()));
  }
  if (indices.size() != priorities.size()) {
    throw InvalidArgument(fmt::format("ReplayBuffer::update_priority: {} indices but {} priorities", indices.size(),
                                      priorities.size()));
  }
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= s.control.capacity() || !std::isfinite(priorities[i]) || priorities[i] < 0) {
      throw InvalidArgument(fmt::format("ReplayBuffer::update_priority: entry {} (row {}, priority {}) is not a row "
                                        "in 0..{} with a finite non-negative priority",
                                        i, indices[i], priorities[i], s.control.capacity() - 1));
    }
  }
  detail::PriorityTrees trees(s.control, s.options.timeout);
  for (std::size_t i = 0; i < indices.size(); ++i) trees.update(indices[i], priorities[i]);
}

CheckpointInfo ReplayBuffer::checkpoint(const fs::path& target, const CheckpointOptions& options) {
  State& s = *state_;
  if (!s.find_rows()) {
    throw InvalidArgument(fmt::format("ReplayBuffer::checkpoint: '{}' has no rows yet (no extend)", s.dir.string()));
  }
  return detail::with_typed_fs_errors("ReplayBuffer::checkpoint", [&] {
    return detail::write_checkpoint(s.control, *s.store, target, options, s.options.timeout);
  });
}

std::int64_t ReplayBuffer::capacity() const { return state_->control.capacity(); }

std::uint64_t ReplayBuffer::inserted() const { return state_->control.cursor().load(std::memory_order_acquire); }

std::uint64_t ReplayBuffer::sampled() const { return state_->control.samples().load(std::memory_order_acquire); }

std::int64_t ReplayBuffer::size() const {
  return static_cast<std::int64_t>(std::min<std::uint64_t>(inserted(), static_cast<std::uint64_t>(capacity())));
}

bool ReplayBuffer::has_layout() const { return state_->find_rows(); }

const TensorTree& ReplayBuffer::storage() {
  if (!state_->find_rows()) {
    throw InvalidArgument(fmt::format("ReplayBuffer::storage: '{}' has no rows yet (no extend)", state_->dir.string()));
  }
  return state_->store->tree();
}

const fs::path& ReplayBuffer::directory() const { return state_->dir; }

}  // namespace tensortree

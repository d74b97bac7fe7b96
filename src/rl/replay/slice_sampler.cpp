// Slices (TorchRL's SliceSampler): runs of slice_length consecutive steps of one trajectory, for
// recurrent learners. A run qualifies when its rows hold consecutive tickets (written in order by
// one extend, or by extends that followed each other) and one trajectory id: so a slice never
// crosses a trajectory's end, nor the ring's write position.
#include <atomic>
#include <cstring>

#include "core/text_format.hpp"
#include "rl/replay/sampler.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// Candidate starts tried per request before the gather is told to ask again (and checks its deadline).
constexpr int kTries = 64;

template <class T>
std::int64_t load_as(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return static_cast<std::int64_t>(value);
}

std::int64_t integer_at(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: return load_as<std::uint8_t>(p);
    case DType::Int8: return load_as<std::int8_t>(p);
    case DType::Int16: return load_as<std::int16_t>(p);
    case DType::UInt16: return load_as<std::uint16_t>(p);
    case DType::Int32: return load_as<std::int32_t>(p);
    case DType::UInt32: return load_as<std::uint32_t>(p);
    case DType::Int64: return load_as<std::int64_t>(p);
    case DType::UInt64: return load_as<std::int64_t>(p);
    default: return 0;
  }
}

class SliceSampler final : public Sampler {
 public:
  void draw(const SamplerContext& context, std::int64_t n, std::vector<SampleUnit>& units) override {
    const std::int64_t length = context.options.slice_length;
    if (n % length != 0) {
      throw InvalidArgument(fmt::format("ReplayBuffer::sample: {} rows are not a whole number of slices of {}", n, length));
    }
    find_trajectory_leaf(context);
    units.resize(static_cast<std::size_t>(n / length));
    for (SampleUnit& unit : units) unit = draw_one(context);
  }

  SampleUnit redraw(const SamplerContext& context, const SampleUnit&) override { return draw_one(context); }

 private:
  void find_trajectory_leaf(const SamplerContext& context) {
    const RowLayout& layout = context.store.layout();
    const std::int64_t leaf = layout.find(context.options.trajectory_key);
    const bool usable = leaf >= 0 && is_integral(layout.row_schema().leaves()[static_cast<std::size_t>(leaf)].dtype) &&
                        layout.row_bytes(static_cast<std::size_t>(leaf)) ==
                            itemsize(layout.row_schema().leaves()[static_cast<std::size_t>(leaf)].dtype);
    if (!usable) {
      throw InvalidArgument(fmt::format("ReplayBuffer::sample: the Slice sampler needs an integer leaf '{}' of one "
                                        "element per row (the trajectory id)",
                                        path_str(context.options.trajectory_key)));
    }
    leaf_ = static_cast<std::size_t>(leaf);
    dtype_ = layout.row_schema().leaves()[leaf_].dtype;
  }

  std::int64_t trajectory(const SamplerContext& context, std::int64_t row) const {
    return integer_at(dtype_, context.store.base(leaf_) + static_cast<std::uint64_t>(row) * itemsize(dtype_));
  }

  // Whether rows start.. hold one trajectory in consecutive tickets; the first row's sequence
  // number when they do, else 0.
  std::uint64_t qualifies(const SamplerContext& context, std::int64_t start) const {
    const std::int64_t capacity = context.control.capacity();
    const std::uint64_t first = context.control.seq(start).load(std::memory_order_acquire);
    if (!is_published(first)) return 0;
    const std::int64_t id = trajectory(context, start);
    for (std::int64_t j = 1; j < context.options.slice_length; ++j) {
      const std::int64_t row = (start + j) % capacity;
      if (context.control.seq(row).load(std::memory_order_acquire) != first + 2 * static_cast<std::uint64_t>(j) ||
          trajectory(context, row) != id) {
        return 0;
      }
    }
    return first;
  }

  SampleUnit draw_one(const SamplerContext& context) {
    for (int attempt = 0; attempt < kTries; ++attempt) {
      const std::int64_t start = uniform_row(context.rng, context.size);
      if (const std::uint64_t first = qualifies(context, start); first != 0) {
        return {start, context.options.slice_length, first};
      }
    }
    return {-1, context.options.slice_length, 0};
  }

  std::size_t leaf_ = 0;
  DType dtype_ = DType::Int64;
};

}  // namespace

std::unique_ptr<Sampler> make_slice_sampler() { return std::make_unique<SliceSampler>(); }

}  // namespace tensortree::detail

#include "tensortree/policy_version.hpp"

#include <algorithm>
#include <limits>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

void stamp_policy_version(TensorTree& trajectory, std::int64_t version, PathRef key) {
  if (version < 0) throw InvalidArgument(fmt::format("stamp_policy_version: version {} is negative", version));
  Tensor stamp = Tensor::empty(trajectory.batch_size(), {DType::Int64});
  std::fill_n(stamp.data<std::int64_t>(), stamp.numel(), version);
  const std::optional<Device> device = trajectory.device();
  trajectory.set(key, device ? stamp.to(*device) : stamp);
}

namespace {

// The versions as int64 on the host, C order, and how many belong to each row.
struct RowVersions {
  Tensor values;
  std::int64_t rows;
  std::int64_t per_row;
};

RowVersions row_versions(const TensorTree& batch, const Path& key) {
  if (batch.batch_dims() == 0) throw InvalidArgument("drop_stale_rows: the batch has no batch dimension to drop rows of");
  const Tensor& leaf = batch.get(key);
  if (leaf.dtype() != DType::Int64) {
    throw InvalidArgument(fmt::format("drop_stale_rows: leaf '{}' is {}, expected int64 (stamp_policy_version)",
                                      path_str(key), leaf.dtype()));
  }
  const std::int64_t rows = batch.batch_size()[0];
  const Tensor values = leaf.to(Device::cpu()).contiguous();
  return {values, rows, rows == 0 ? 0 : values.numel() / rows};
}

// The row's lag: the current version minus its oldest version.
std::int64_t row_lag(const std::int64_t* versions, std::int64_t per_row, std::int64_t row, std::int64_t current) {
  std::int64_t oldest = std::numeric_limits<std::int64_t>::max();
  std::int64_t newest = std::numeric_limits<std::int64_t>::min();
  for (std::int64_t i = 0; i < per_row; ++i) {
    oldest = std::min(oldest, versions[i]);
    newest = std::max(newest, versions[i]);
  }
  if (per_row > 0 && (oldest < 0 || newest > current)) {
    throw InvalidArgument(fmt::format("drop_stale_rows: row {} holds policy versions {} to {}, outside [0, {}] "
                                      "(the current version)",
                                      row, oldest, newest, current));
  }
  return per_row == 0 ? 0 : current - oldest;
}

}  // namespace

FreshRows drop_stale_rows(const TensorTree& batch, std::int64_t current_version, std::int64_t max_lag, PathRef key) {
  if (max_lag < 0) throw InvalidArgument(fmt::format("drop_stale_rows: max_lag {} is negative", max_lag));
  const RowVersions versions = row_versions(batch, key);
  Tensor keep = Tensor::empty({versions.rows}, {DType::Bool});
  bool* keep_row = keep.data<bool>();
  const std::int64_t* values = versions.values.data<std::int64_t>();
  PolicyLag lag{.rows = versions.rows};
  double lag_sum = 0;
  for (std::int64_t row = 0; row < versions.rows; ++row) {
    const std::int64_t row_lag_value = row_lag(values + row * versions.per_row, versions.per_row, row, current_version);
    keep_row[row] = row_lag_value <= max_lag;
    lag.dropped += keep_row[row] ? 0 : 1;
    lag.max_lag = std::max(lag.max_lag, row_lag_value);
    lag_sum += static_cast<double>(row_lag_value);
  }
  lag.mean_lag = versions.rows == 0 ? 0.0 : lag_sum / static_cast<double>(versions.rows);
  return {lag.dropped == 0 ? batch : batch.masked_select(keep), lag};
}

}  // namespace tensortree

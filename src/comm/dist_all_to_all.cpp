// all_to_all and all_to_all_single: equal blocks, or rows split as each rank says, the receivers'
// splits learnt in a small round when the caller does not pass them.
#include "tensortree/dist_ops.hpp"

#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "comm/collective_check.hpp"
#include "comm/dist_internal.hpp"
#include "comm/peer_claims.hpp"
#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::dist {

using namespace detail;

namespace {

// ---- all_to_all_single's splits ------------------------------------------------------------------

std::vector<std::int64_t> checked_splits(const std::vector<std::int64_t>& splits, std::string_view name,
                                         const Group& group, std::string_view op) {
  const std::string prefix = fmt::format("{}: {}", op, name);
  if (static_cast<int>(splits.size()) != group.size()) {
    throw InvalidArgument(fmt::format("{} holds {} sizes; the group has {} ranks", prefix, splits.size(),
                                      group.size()));
  }
  for (std::size_t r = 0; r < splits.size(); ++r) {
    if (splits[r] < 0) {
      throw InvalidArgument(fmt::format("{}[{}] is negative ({})", prefix, r, splits[r]));
    }
  }
  return splits;
}

std::vector<std::int64_t> input_splits_for(const Tensor& input, const AllToAllSplits& splits, const Group& group,
                                           std::string_view op) {
  const std::int64_t rows = input.size(0);
  if (splits.input_splits.empty()) {
    if (rows % group.size() != 0) {
      throw InvalidArgument(fmt::format("{}: input has {} rows, which do not split into {} equal blocks; pass "
                                        "input_splits", op, rows, group.size()));
    }
    return std::vector<std::int64_t>(static_cast<std::size_t>(group.size()), rows / group.size());
  }
  std::vector<std::int64_t> checked = checked_splits(splits.input_splits, "input_splits", group, op);
  const std::int64_t total = std::accumulate(checked.begin(), checked.end(), std::int64_t{0});
  if (total != rows) {
    throw InvalidArgument(fmt::format("{}: input_splits add up to {} rows but input has {}", op, total, rows));
  }
  return checked;
}

std::string dtype_label(std::int64_t raw) {
  if (raw >= 0 && raw <= 255 && is_valid_dtype(static_cast<std::uint8_t>(raw))) {
    return std::string(dtype_name(static_cast<DType>(raw)));
  }
  return fmt::format("dtype #{}", raw);
}

// The small round: each rank tells rank r how many rows it sends there, with its dtype and row
// size so that a peer holding something else is rejected on every rank before any data moves.
std::vector<std::int64_t> learn_output_splits(const std::vector<std::int64_t>& input_splits, const Tensor& input,
                                              std::int64_t row_numel, const Group& group, std::string_view op) {
  constexpr std::int64_t kWords = 3;
  const auto n = static_cast<std::size_t>(group.size());
  std::vector<std::int64_t> outgoing;
  for (std::int64_t rows : input_splits) {
    outgoing.insert(outgoing.end(), {rows, static_cast<std::int64_t>(input.dtype()), row_numel});
  }
  const Tensor send = int64_tensor(outgoing);
  const Tensor received = Tensor::empty({static_cast<std::int64_t>(n * kWords)}, {DType::Int64});
  const std::vector<std::int64_t> counts(n, kWords);
  metadata_collectives(group).all_to_all(received, send, counts, counts)->wait();
  const std::vector<std::int64_t> incoming = int64_values(received);
  std::vector<std::int64_t> output_splits(n);
  for (std::size_t r = 0; r < n; ++r) {
    const std::int64_t rows = incoming[r * kWords];
    const std::int64_t dtype = incoming[r * kWords + 1];
    const std::int64_t peer_row_numel = incoming[r * kWords + 2];
    if (dtype != static_cast<std::int64_t>(input.dtype()) || peer_row_numel != row_numel) {
      throw InvalidArgument(fmt::format("{}: rank {}'s input is {} with rows of {} elements, this rank's is {} with "
                                        "rows of {}", op, r, dtype_label(dtype), peer_row_numel, input.dtype(),
                                        row_numel));
    }
    if (rows < 0) {
      throw CorruptData(fmt::format("{}: rank {} announced {} rows", op, r, rows));
    }
    output_splits[r] = rows;
  }
  return output_splits;
}

// The rows this rank receives, overflow-checked; when the peers announced them (`from_peers`), each
// peer's share is a claim bounded by the group's max_message_bytes before anything is allocated.
std::int64_t total_output_rows(const std::vector<std::int64_t>& output_splits, std::int64_t row_numel,
                               std::size_t itemsize, const Group& group, std::string_view op, bool from_peers) {
  std::int64_t total = 0;
  for (std::size_t r = 0; r < output_splits.size(); ++r) {
    const std::int64_t rows = output_splits[r];
    const std::optional<std::int64_t> elements = tensortree::detail::checked_mul(rows, row_numel);
    const std::optional<std::int64_t> bytes =
        elements ? tensortree::detail::checked_mul(*elements, static_cast<std::int64_t>(itemsize)) : std::nullopt;
    const std::optional<std::int64_t> sum = tensortree::detail::checked_add(total, rows);
    if (!bytes || !sum) {
      const std::string message = fmt::format("{}: {} rows from rank {} of {} elements overflow int64", op, rows, r,
                                              row_numel);
      // Rows the peers announced are their bytes; rows the caller passed are its argument.
      if (from_peers) throw CorruptData(message);
      throw InvalidArgument(message);
    }
    if (from_peers) {
      tensortree::detail::check_peer_claim(group, static_cast<int>(r), static_cast<std::uint64_t>(*bytes),
                                           fmt::format("{}: the rows rank {} announced", op, r));
    }
    total = *sum;
  }
  return total;
}

std::vector<std::int64_t> element_counts(const std::vector<std::int64_t>& row_splits, std::int64_t row_numel,
                                         std::string_view op) {
  std::vector<std::int64_t> counts;
  counts.reserve(row_splits.size());
  for (std::int64_t rows : row_splits) counts.push_back(rows_times(rows, row_numel, op));
  return counts;
}

}  // namespace

// ---- all_to_all ------------------------------------------------------------------------------------

Pending<std::vector<Tensor>> all_to_all_async(std::span<const Tensor> inputs, const Group& group) {
  constexpr std::string_view op = "all_to_all";
  check_member(group, op);
  check_collective({.op = op, .tensor = first_of(inputs)}, group,
                   [&] { check_per_rank_list(inputs, "inputs", group, op); });
  const Tensor stacked = Tensor::stack(inputs);
  const Tensor output = empty_like_shape(stacked.shape(), stacked);
  const std::vector<std::int64_t> counts(inputs.size(), inputs[0].numel());
  WorkPtr work = group.collectives(output.device()).all_to_all(output, stacked, counts, counts);
  return {std::move(work), blocks_of(output)};
}

std::vector<Tensor> all_to_all(std::span<const Tensor> inputs, const Group& group) {
  auto pending = all_to_all_async(inputs, group);
  return std::move(pending.get());
}

Pending<Tensor> all_to_all_single_async(const Tensor& input, const Group& group, const AllToAllSplits& splits) {
  constexpr std::string_view op = "all_to_all_single";
  check_member(group, op);
  // Ranks may send different numbers of rows: only the dtype must agree.
  check_collective({.op = op, .tensor = &input, .same_shape = false}, group, [&] {
    check_defined(input, "input", op);
    if (input.dim() == 0) invalid(op, "input is zero-dimensional and has no rows to split");
  });
  const Shape row_shape(input.shape().begin() + 1, input.shape().end());
  const std::int64_t row_numel = numel_of(row_shape);
  const std::vector<std::int64_t> input_splits = input_splits_for(input, splits, group, op);
  const std::vector<std::int64_t> output_splits =
      splits.output_splits.empty() ? learn_output_splits(input_splits, input, row_numel, group, op)
                                   : checked_splits(splits.output_splits, "output_splits", group, op);
  const std::int64_t output_rows =
      total_output_rows(output_splits, row_numel, input.itemsize(), group, op, splits.output_splits.empty());
  const Tensor output = empty_like_shape(with_leading(output_rows, row_shape), input);
  WorkPtr work = group.collectives(input.device())
                     .all_to_all(output, input.contiguous(), element_counts(output_splits, row_numel, op),
                                 element_counts(input_splits, row_numel, op));
  return {std::move(work), output};
}

Tensor all_to_all_single(const Tensor& input, const Group& group, const AllToAllSplits& splits) {
  return all_to_all_single_async(input, group, splits).get();
}

}  // namespace tensortree::dist

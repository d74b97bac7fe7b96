#include "comm/collective_check.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "comm/dist_internal.hpp"
#include "comm/group_state.hpp"
#include "core/text_format.hpp"

namespace tensortree::dist::detail {

namespace {

constexpr std::string_view kDebugVariable = "TENSORTREE_DISTRIBUTED_DEBUG";

// One rank's call as fixed-size int64 words, so one all-gather carries every rank's.
constexpr std::size_t kOpNameWords = 4;  // the first 32 bytes of the operation's name
constexpr std::size_t kMaxDims = 16;     // dimensions compared; ndim is compared whole
struct CallWords {
  enum Slot : std::size_t {
    kSequence = kOpNameWords,
    kRoot,
    kReduction,
    kDType,
    kNDim,
    kDims,
    kVerdict = kDims + kMaxDims,
    kCount
  };
  std::array<std::int64_t, kCount> words{};
};

constexpr std::int64_t kNone = -1;

// `collectives_so_far`: how many collectives this rank has posted on the group. A rank that skipped
// one, or called one more, shows here before its calls' fields tell anything.
CallWords encode(const CollectiveCall& call, std::uint64_t collectives_so_far, bool arguments_valid) {
  CallWords out;
  std::memcpy(out.words.data(), call.op.data(), std::min(call.op.size(), kOpNameWords * sizeof(std::int64_t)));
  out.words[CallWords::kSequence] = static_cast<std::int64_t>(collectives_so_far);
  out.words[CallWords::kRoot] = call.root;
  out.words[CallWords::kReduction] = call.reduction ? static_cast<std::int64_t>(*call.reduction) : kNone;
  const bool has_tensor = call.tensor != nullptr && call.tensor->defined();
  out.words[CallWords::kDType] = has_tensor ? static_cast<std::int64_t>(call.tensor->dtype()) : kNone;
  out.words[CallWords::kNDim] = has_tensor && call.same_shape ? call.tensor->dim() : kNone;
  if (has_tensor && call.same_shape) {
    const Shape& shape = call.tensor->shape();
    std::copy_n(shape.begin(), std::min(shape.size(), kMaxDims), out.words.begin() + CallWords::kDims);
  }
  out.words[CallWords::kVerdict] = arguments_valid ? 1 : 0;
  return out;
}

// What one field of a rank's call says, for the message.
using FieldReader = std::string (*)(const std::int64_t* words);

std::string op_field(const std::int64_t* words) {
  char name[kOpNameWords * sizeof(std::int64_t) + 1] = {};
  std::memcpy(name, words, kOpNameWords * sizeof(std::int64_t));
  return name;
}
std::string sequence_field(const std::int64_t* words) {
  return fmt::format("after {} collectives", words[CallWords::kSequence]);
}
std::string root_field(const std::int64_t* words) {
  return words[CallWords::kRoot] == kNone ? "none" : fmt::format("{}", words[CallWords::kRoot]);
}
std::string reduction_field(const std::int64_t* words) {
  const std::int64_t op = words[CallWords::kReduction];
  return op == kNone ? "none" : std::string(reduce_op_name(static_cast<ReduceOp>(op)));
}
std::string dtype_field(const std::int64_t* words) {
  const std::int64_t dtype = words[CallWords::kDType];
  return dtype == kNone ? "none" : std::string(dtype_name(static_cast<DType>(dtype)));
}
std::string shape_field(const std::int64_t* words) {
  const std::int64_t ndim = words[CallWords::kNDim];
  if (ndim == kNone) return "any";
  const std::span<const std::int64_t> dims(words + CallWords::kDims, std::min<std::size_t>(ndim, kMaxDims));
  return fmt::format("[{}{}]", fmt::join(dims, ", "), ndim > static_cast<std::int64_t>(kMaxDims) ? ", ..." : "");
}

struct Field {
  const char* name;
  FieldReader read;
};
constexpr std::array<Field, 6> kFields{{{"operation", op_field},
                                        {"sequence", sequence_field},
                                        {"root", root_field},
                                        {"reduction", reduction_field},
                                        {"dtype", dtype_field},
                                        {"shape", shape_field}}};

std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

// "shape: [3, 5] on ranks 0, 2; [4, 5] on rank 1" for each field on which the ranks differ.
std::string disagreements(const std::vector<std::int64_t>& table, int ranks) {
  std::vector<std::string> differing;
  for (const Field& field : kFields) {
    std::map<std::string, std::vector<int>> ranks_by_value;
    for (int r = 0; r < ranks; ++r) ranks_by_value[field.read(&table[r * CallWords::kCount])].push_back(r);
    if (ranks_by_value.size() < 2) continue;
    std::vector<std::string> values;
    for (const auto& [value, holders] : ranks_by_value) values.push_back(fmt::format("{} on {}", value, rank_list(holders)));
    differing.push_back(fmt::format("{}: {}", field.name, fmt::join(values, ", ")));
  }
  return fmt::format("{}", fmt::join(differing, "; "));
}

}  // namespace

bool debug_mode_enabled(const Group& group) {
  const auto& state = tensortree::detail::GroupAccess::state(group);
  const std::optional<bool> requested = state ? state->requested_options().debug_checks : std::nullopt;
  return requested ? *requested : debug_setting_from_environment();
}

bool debug_setting_from_environment() {
  const char* value = std::getenv(kDebugVariable.data());
  if (value == nullptr) return false;
  const std::string_view setting(value);
  if (setting == "DETAIL") return true;
  if (setting.empty() || setting == "OFF" || setting == "INFO") return false;
  throw InvalidArgument(fmt::format("{}={}: expected OFF, INFO or DETAIL", kDebugVariable, setting));
}

void agree_on_collective(const CollectiveCall& call, const Group& group, std::exception_ptr local_error) {
  const std::uint64_t collectives_so_far =
      tensortree::detail::GroupAccess::require(group).operation_counters().collectives.load(std::memory_order_relaxed);
  const CallWords mine = encode(call, collectives_so_far, local_error == nullptr);
  const int ranks = group.size();
  Tensor gathered = Tensor::empty({ranks, static_cast<std::int64_t>(CallWords::kCount)}, {DType::Int64});
  metadata_collectives(group).all_gather(gathered, int64_tensor(mine.words))->wait();
  const std::vector<std::int64_t> table = int64_values(gathered);

  if (local_error) std::rethrow_exception(local_error);
  std::vector<int> rejected;
  for (int r = 0; r < ranks; ++r) {
    if (table[r * CallWords::kCount + CallWords::kVerdict] == 0) rejected.push_back(r);
  }
  if (!rejected.empty()) {
    throw InvalidArgument(fmt::format("{} after {} collectives ({}=DETAIL): {} rejected {} own arguments; no rank "
                                      "entered the collective",
                                      call.op, collectives_so_far, kDebugVariable, rank_list(rejected),
                                      rejected.size() == 1 ? "its" : "their"));
  }
  const std::string differences = disagreements(table, ranks);
  if (!differences.empty()) {
    throw InvalidArgument(fmt::format("{} after {} collectives ({}=DETAIL): the ranks' calls differ: {}", call.op,
                                      collectives_so_far, kDebugVariable, differences));
  }
}

}  // namespace tensortree::dist::detail

#include "transport/mpi/mpi_argument_check.hpp"

#include <algorithm>
#include <numeric>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

void Check::host(const Tensor& tensor, std::string_view argument) const {
  if (!tensor.defined()) fail(fmt::format("{} is undefined", argument));
  if (!tensor.device().is_cpu()) {
    fail(fmt::format("{} is on {}; MPI moves host memory", argument, tensor.device()));
  }
  if (!tensor.is_contiguous()) fail(fmt::format("{} is not contiguous", argument));
}

void Check::elements(const Tensor& tensor, std::int64_t expected, std::string_view argument) const {
  if (tensor.numel() != expected) {
    fail(fmt::format("{} has {} elements, expected {}", argument, tensor.numel(), expected));
  }
}

void Check::same_dtype(const Tensor& tensor, DType expected, std::string_view argument) const {
  if (tensor.dtype() != expected) {
    fail(fmt::format("{} is {}, expected {}", argument, tensor.dtype(), expected));
  }
}

void Check::group_rank(int peer, std::string_view argument) const {
  if (peer < 0 || peer >= size_) {
    fail(fmt::format("{} {} is outside the group of {} ranks", argument, peer, size_));
  }
}

void Check::tag(int tag, int upper_bound) const {
  if (tag < 0 || tag > upper_bound) {
    fail(fmt::format("tag {} is outside 0..{}", tag, upper_bound));
  }
}

void Check::counts(std::span<const std::int64_t> counts, const Tensor& tensor, std::string_view argument) const {
  if (counts.size() != static_cast<std::size_t>(size_)) {
    fail(fmt::format("{} has {} entries, expected {}", argument, counts.size(), size_));
  }
  if (std::any_of(counts.begin(), counts.end(), [](std::int64_t count) { return count < 0; })) {
    fail(fmt::format("{} holds a negative count", argument));
  }
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  if (tensor.numel() != total) {
    fail(fmt::format("{} add up to {} elements but the tensor has {}", argument, total, tensor.numel()));
  }
}

void Check::fail(const std::string& what) const {
  throw InvalidArgument(fmt::format("mpi backend {} on rank {}: {}", operation_, rank_, what));
}

}  // namespace tensortree::detail

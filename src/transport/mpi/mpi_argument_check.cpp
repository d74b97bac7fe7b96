#include "transport/mpi/mpi_argument_check.hpp"

#include <algorithm>
#include <numeric>

#include "tensortree/error.hpp"

namespace tensortree::detail {

void Check::host(const Tensor& tensor, std::string_view argument) const {
  if (!tensor.defined()) fail(std::string(argument) + " is undefined");
  if (!tensor.device().is_cpu()) {
    fail(std::string(argument) + " is on " + tensor.device().str() + "; MPI moves host memory");
  }
  if (!tensor.is_contiguous()) fail(std::string(argument) + " is not contiguous");
}

void Check::elements(const Tensor& tensor, std::int64_t expected, std::string_view argument) const {
  if (tensor.numel() != expected) {
    fail(std::string(argument) + " has " + std::to_string(tensor.numel()) + " elements, expected " +
         std::to_string(expected));
  }
}

void Check::same_dtype(const Tensor& tensor, DType expected, std::string_view argument) const {
  if (tensor.dtype() != expected) {
    fail(std::string(argument) + " is " + std::string(dtype_name(tensor.dtype())) + ", expected " +
         std::string(dtype_name(expected)));
  }
}

void Check::group_rank(int peer, std::string_view argument) const {
  if (peer < 0 || peer >= size_) {
    fail(std::string(argument) + " " + std::to_string(peer) + " is outside the group of " +
         std::to_string(size_) + " ranks");
  }
}

void Check::tag(int tag, int upper_bound) const {
  if (tag < 0 || tag > upper_bound) {
    fail("tag " + std::to_string(tag) + " is outside 0.." + std::to_string(upper_bound));
  }
}

void Check::counts(std::span<const std::int64_t> counts, const Tensor& tensor, std::string_view argument) const {
  if (counts.size() != static_cast<std::size_t>(size_)) {
    fail(std::string(argument) + " has " + std::to_string(counts.size()) + " entries, expected " +
         std::to_string(size_));
  }
  if (std::any_of(counts.begin(), counts.end(), [](std::int64_t count) { return count < 0; })) {
    fail(std::string(argument) + " holds a negative count");
  }
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  if (tensor.numel() != total) {
    fail(std::string(argument) + " add up to " + std::to_string(total) + " elements but the tensor has " +
         std::to_string(tensor.numel()));
  }
}

void Check::fail(const std::string& what) const {
  throw InvalidArgument("mpi backend " + std::string(operation_) + " on rank " + std::to_string(rank_) + ": " +
                        what);
}

}  // namespace tensortree::detail

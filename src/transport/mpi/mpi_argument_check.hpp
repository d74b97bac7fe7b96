// The MPI backend's own argument checks. dist_ops validates what the caller passed; these guard
// what would otherwise let MPI write outside a buffer or read device memory, and name the rank,
// the operation and the sizes involved (InvalidArgument).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tensortree/tensor.hpp"

namespace tensortree::detail {

class Check {
 public:
  Check(int rank, int size, std::string_view operation) : rank_(rank), size_(size), operation_(operation) {}

  void host(const Tensor& tensor, std::string_view argument) const;
  void elements(const Tensor& tensor, std::int64_t expected, std::string_view argument) const;
  void same_dtype(const Tensor& tensor, DType expected, std::string_view argument) const;
  void group_rank(int peer, std::string_view argument) const;
  void tag(int tag, int upper_bound) const;
  void counts(std::span<const std::int64_t> counts, const Tensor& tensor, std::string_view argument) const;

 private:
  [[noreturn]] void fail(const std::string& what) const;

  int rank_;
  int size_;
  std::string_view operation_;
};

}  // namespace tensortree::detail

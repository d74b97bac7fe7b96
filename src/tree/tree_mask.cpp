// TensorTree methods driven by a bool mask over the leading batch dimensions: masked_select
// (td[mask]), where, masked_fill_.
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tree.hpp"
#include "tree/batch_dims.hpp"

namespace tensortree {

TensorTree TensorTree::masked_select(const Tensor& mask) const {
  detail::check_batch_mask("masked_select", mask, batch_size_);
  const Tensor host = mask.to(Device::cpu());
  const std::size_t mask_dims = host.shape().size();
  const std::int64_t positions = host.numel();
  // The flat (C-order) positions where the mask is true: rows of the leaves with their mask
  // dimensions merged into one.
  std::vector<std::int64_t> chosen;
  for (std::int64_t i = 0; i < positions; ++i) {
    if (host.value_at_linear(i).real() != 0.0) chosen.push_back(i);
  }
  const auto count = static_cast<std::int64_t>(chosen.size());
  Tensor rows = Tensor::empty({count}, {DType::Int64, Device::cpu(), false});
  for (std::int64_t i = 0; i < count; ++i) rows.at<std::int64_t>({i}) = chosen[static_cast<std::size_t>(i)];
  return transformed(
      [&](const Path&, const Tensor& leaf) {
        const Tensor merged = leaf.reshape(detail::replace_prefix(leaf.shape(), mask_dims, {positions}));
        return merged.index_select(0, rows);
      },
      [&](const Shape& batch) { return detail::replace_prefix(batch, mask_dims, {count}); });
}

TensorTree TensorTree::where(const Tensor& cond, const TensorTree& other) const {
  detail::check_batch_mask("where", cond, batch_size_);
  Path path = location();
  return paired(other, path, "where", [&cond](const Path& at, const Tensor& mine, const Tensor& theirs) {
    if (mine.shape() != theirs.shape()) {
      throw InvalidArgument(fmt::format("where: leaf '{}' has shape {} here and {} in the other tree", path_str(at),
                                        shape_str(mine.shape()), shape_str(theirs.shape())));
    }
    return Tensor::where(detail::mask_for_leaf(cond, mine.dim()), mine, theirs);
  });
}

void TensorTree::masked_fill_(const Tensor& mask, double value) const {
  detail::check_batch_mask("masked_fill_", mask, batch_size_);
  for_each_leaf([&](const Path&, const Tensor& leaf) { leaf.masked_fill_(detail::mask_for_leaf(mask, leaf.dim()), value); });
}

}  // namespace tensortree

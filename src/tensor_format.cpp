// PyTorch-style printing of tensors.
#include <sstream>

#include "tensortree/tensor.hpp"

namespace tensortree {

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  os << "tensor(" << dtype_name(dtype_) << shape_str(shape_) << ")";
  return os.str();
}

}  // namespace tensortree

#include "conversions.hpp"

#include <pybind11/stl.h>

#include <cmath>

#include "tensor_binding.hpp"
#include "tensortree/error.hpp"
#include "tensortree/replay_buffer.hpp"

namespace tensortree::python {

namespace py = pybind11;

std::chrono::milliseconds milliseconds_from(double seconds, const char* what) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(seconds) +
                          " s is not a wait (a finite number of seconds, at least 0)");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000)));
}

std::filesystem::path replay_place(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos) return name_or_path;
  return ReplayBuffer::shared_memory_path(name_or_path);
}

Tensor column_from(const py::handle& values, DType dtype) {
  if (py::isinstance<py::list>(values) || py::isinstance<py::tuple>(values)) {
    if (dtype == DType::Int64) {
      const auto list = values.cast<std::vector<std::int64_t>>();
      Tensor out = Tensor::empty({static_cast<std::int64_t>(list.size())}, {DType::Int64});
      std::copy(list.begin(), list.end(), out.data<std::int64_t>());
      return out;
    }
    const auto list = values.cast<std::vector<double>>();
    Tensor out = Tensor::empty({static_cast<std::int64_t>(list.size())}, {DType::Float64});
    std::copy(list.begin(), list.end(), out.data<double>());
    return out.to(dtype);
  }
  Tensor column = tensor_from_python(values);
  if (column.dim() != 1) throw InvalidArgument("a column of indices or values is 1-D");
  if (!column.device().is_cpu()) column = column.to(Device::cpu());
  if (column.dtype() != dtype) column = column.to(dtype);
  return column.contiguous();
}

py::tuple tuple_of(std::span<const std::int64_t> sizes) {
  py::tuple out(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) out[i] = py::int_(sizes[i]);
  return out;
}

}  // namespace tensortree::python

// Small conversions every binding shares: seconds as the library's durations, names as paths, and
// index or value columns given as lists, NumPy arrays or torch tensors.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tensortree/tensor.hpp"

namespace tensortree::python {

// Python's seconds (a float) as milliseconds; InvalidArgument for a negative or non-finite wait.
std::chrono::milliseconds milliseconds_from(double seconds, const char* what);

// A replay buffer's place: a plain name ("job") lives in shared memory (`shared_memory_path`), a
// name with a '/' is a directory.
std::filesystem::path replay_place(const std::string& name_or_path);

// A 1-D column as a contiguous CPU tensor of `dtype`: a list of numbers, a NumPy array or a torch
// tensor (converted when its dtype differs).
Tensor column_from(const pybind11::handle& values, DType dtype);

// A Python tuple of the sizes.
pybind11::tuple tuple_of(std::span<const std::int64_t> sizes);

}  // namespace tensortree::python

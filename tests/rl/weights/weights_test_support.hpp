// Shared by the weight publication tests: parameter trees whose every element names the version
// and leaf it belongs to, an element-by-element check, and publication names no other test uses.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tensortree/tree.hpp"

namespace tensortree::weights_test {

struct ParamDef {
  const char* path;
  DType dtype;
  Shape shape;
};

// Nested, several dtypes, sizes that are not multiples of the 64-byte alignment.
inline const std::vector<ParamDef>& param_defs() {
  static const std::vector<ParamDef> defs = {
      {"encoder.w", DType::Float32, {64, 129}},
      {"encoder.b", DType::Float32, {129}},
      {"head.w", DType::Float64, {33, 17}},
      {"head.steps", DType::Int64, {7}},
      {"norm.scale", DType::Int32, {301}},
      {"norm.count", DType::Int16, {5, 3}},
  };
  return defs;
}

// Non-zero, exact in every dtype used, and different in every element from the value of the same
// element in any version less than 1021 versions away: a slot holding a mix of two versions fails.
inline double param_value(std::uint64_t version, std::size_t leaf, std::int64_t index) {
  return static_cast<double>(1 + (static_cast<std::int64_t>(version % 1021) * 37 + static_cast<std::int64_t>(leaf) * 13 + index) % 1021);
}

inline TensorTree make_params(std::uint64_t version, const std::vector<ParamDef>& defs = param_defs()) {
  TensorTree tree;
  for (std::size_t leaf = 0; leaf < defs.size(); ++leaf) {
    Tensor t = Tensor::empty(defs[leaf].shape, {defs[leaf].dtype});
    visit_dtype(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T>) {
        T* data = t.data<T>();
        for (std::int64_t i = 0; i < t.numel(); ++i) data[i] = static_cast<T>(param_value(version, leaf, i));
      }
    });
    tree.set(defs[leaf].path, t);
  }
  return tree;
}

// Empty when every element of every leaf of `tree` (CPU) holds version's value; else the first
// that does not.
inline std::string params_mismatch(const TensorTree& tree, std::uint64_t version,
                                   const std::vector<ParamDef>& defs = param_defs()) {
  for (std::size_t leaf = 0; leaf < defs.size(); ++leaf) {
    if (!tree.contains(defs[leaf].path)) return std::string(defs[leaf].path) + " is missing";
    const Tensor got = tree.get(defs[leaf].path).contiguous();
    if (got.dtype() != defs[leaf].dtype || got.shape() != defs[leaf].shape) {
      return std::string(defs[leaf].path) + " has another dtype or shape";
    }
    std::string mismatch;
    visit_dtype(got.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T>) {
        const T* data = got.data<T>();
        for (std::int64_t i = 0; i < got.numel() && mismatch.empty(); ++i) {
          if (data[i] != static_cast<T>(param_value(version, leaf, i))) {
            mismatch = std::string(defs[leaf].path) + ": element " + std::to_string(i) + " is " +
                       std::to_string(static_cast<double>(data[i])) + ", version " + std::to_string(version) +
                       " has " + std::to_string(param_value(version, leaf, i));
          }
        }
      }
    });
    if (!mismatch.empty()) return mismatch;
  }
  return {};
}

// A publication name (in /dev/shm) that no other test or run uses.
inline std::string unique_name(const std::string& what) {
  std::random_device random;
  return "tt-weights-test-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(random());
}

}  // namespace tensortree::weights_test

// std::filesystem reports OS failures as filesystem_error; the library's callers catch
// tensortree::Error. One wrapper turns the first into BackendError naming the operation.
#pragma once

#include <filesystem>
#include <string_view>
#include <utility>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

template <class Fn>
decltype(auto) with_typed_fs_errors(std::string_view op, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const std::filesystem::filesystem_error& e) {
    throw BackendError(fmt::format("{}: {}", op, e.what()));
  }
}

}  // namespace tensortree::detail

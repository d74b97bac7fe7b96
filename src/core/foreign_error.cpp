#include "core/foreign_error.hpp"

#include <fmt/format.h>

#include "tensortree/error.hpp"

namespace tensortree::detail {

void throw_foreign_error(std::string_view api, std::string_view call, std::string_view message,
                         long code, const char* file, int line) {
  throw BackendError(fmt::format("{} error {} ({}) in {} at {}:{}", api, code, message, call, file, line));
}

}  // namespace tensortree::detail

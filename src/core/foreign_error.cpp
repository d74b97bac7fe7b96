#include "core/foreign_error.hpp"

#include <sstream>

#include "tensortree/error.hpp"

namespace tensortree::detail {

void throw_foreign_error(std::string_view api, std::string_view call, std::string_view message,
                         long code, const char* file, int line) {
  std::ostringstream os;
  os << api << " error " << code << " (" << message << ") in " << call << " at " << file << ':'
     << line;
  throw BackendError(os.str());
}

}  // namespace tensortree::detail

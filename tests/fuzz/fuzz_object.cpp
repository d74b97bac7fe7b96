// Object-collective payloads: a peer can seal any bytes it likes with a valid checksum, so the
// archive bytes themselves are the input. The first byte picks the value type.
// Value types whose loading follows pointers (shared_ptr, raw pointers, polymorphic classes) do not
// compile as object-collective values (detail/object_archive.hpp), so they cannot be here.
#include <boost/serialization/map.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_target.hpp"
#include "object_types.hpp"
#include "tensortree/dist_objects.hpp"

namespace {

template <class T>
void decode_as(const std::string& archive) {
  (void)tensortree::dist::detail::from_bytes<T>(tensortree::dist::detail::seal(archive));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string archive(reinterpret_cast<const char*>(data) + 1, size - 1);
  return fuzz::expect_typed_errors([&] {
    switch (data[0] % 8) {
      case 0: decode_as<std::string>(archive); break;
      case 1: decode_as<std::vector<std::int64_t>>(archive); break;
      case 2: decode_as<std::map<std::string, double>>(archive); break;
      case 3: decode_as<std::pair<std::int32_t, std::string>>(archive); break;
      case 4: decode_as<std::vector<std::vector<float>>>(archive); break;
      case 5: decode_as<fuzz::Flags>(archive); break;
      case 6: decode_as<std::vector<bool>>(archive); break;
      default: decode_as<std::map<std::int64_t, std::vector<std::string>>>(archive); break;
    }
  });
}

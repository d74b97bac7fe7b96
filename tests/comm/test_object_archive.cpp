// Object-collective payloads from a hostile peer: a checksum-valid envelope whose archive bytes
// were crafted. Every such payload is CorruptData; valid ones still round-trip.
#include <boost/serialization/array.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tensortree/dist_objects.hpp"

namespace {

using tensortree::CorruptData;
namespace detail = tensortree::dist::detail;

enum class Mode : std::uint8_t { Train, Eval };
enum Legacy : int { kOff, kOn };

// The archive bytes behind a value's envelope: what a peer would alter before sealing again.
template <class T>
std::string archive_of(const T& value) {
  return detail::unseal(detail::to_bytes(value));
}

template <class T>
T decode(const std::string& archive) {
  return detail::from_bytes<T>(detail::seal(archive));
}

constexpr std::string_view kSignature = "serialization::archive";

}  // namespace

TEST_CASE("valid bools, enums and bool arrays round-trip", "[object]") {
  CHECK(decode<bool>(archive_of(true)));
  CHECK_FALSE(decode<bool>(archive_of(false)));
  CHECK(decode<Mode>(archive_of(Mode::Eval)) == Mode::Eval);
  CHECK(decode<Legacy>(archive_of(kOn)) == kOn);
  CHECK(decode<std::array<bool, 3>>(archive_of(std::array<bool, 3>{true, false, true})) ==
        std::array<bool, 3>{true, false, true});
  CHECK(decode<std::vector<bool>>(archive_of(std::vector<bool>{false, true, true})) ==
        std::vector<bool>{false, true, true});
}

TEST_CASE("a bool byte other than 0 or 1 is CorruptData", "[object][hostile]") {
  for (const unsigned char byte : {2, 7, 0x80, 0xff}) {
    std::string archive = archive_of(true);
    archive.back() = static_cast<char>(byte);
    CHECK_THROWS_AS(decode<bool>(archive), CorruptData);
    CHECK_THROWS_WITH(decode<bool>(archive), Catch::Contains("bool of value " + std::to_string(byte)));
  }
}

TEST_CASE("a bad bool inside an array read as one block is CorruptData", "[object][hostile]") {
  std::string archive = archive_of(std::array<bool, 4>{true, false, true, true});
  archive[archive.size() - 2] = 5;
  CHECK_THROWS_AS((decode<std::array<bool, 4>>(archive)), CorruptData);

  std::string vector_archive = archive_of(std::vector<bool>{true, true});
  vector_archive.back() = 3;
  CHECK_THROWS_AS(decode<std::vector<bool>>(vector_archive), CorruptData);
}

TEST_CASE("an archive of another Boost library version is CorruptData", "[object][hostile]") {
  std::string archive = archive_of(std::string("policy"));
  const std::size_t version_at = archive.find(kSignature) + kSignature.size();
  REQUIRE(version_at < archive.size());
  for (const unsigned char other : {3, 5, 6, 7, 8, 200}) {
    archive[version_at] = static_cast<char>(other);
    archive[version_at + 1] = 0;
    CHECK_THROWS_WITH(decode<std::string>(archive), Catch::Contains("Boost archive header"));
  }
}

TEST_CASE("an archive that is only its header is CorruptData for every type", "[object][hostile]") {
  const std::string full = archive_of(true);
  const std::string header = full.substr(0, full.size() - 1);
  CHECK_THROWS_AS(decode<bool>(header), CorruptData);
  CHECK_THROWS_AS(decode<std::string>(header), CorruptData);
  CHECK_THROWS_AS(decode<std::vector<double>>(header), CorruptData);
  CHECK_THROWS_AS(decode<Mode>(header), CorruptData);
  // Only the signature, without a library version (Boost's own parsing would assert on it), and
  // every shorter prefix.
  const std::size_t signature_end = full.find(kSignature) + kSignature.size();
  for (std::size_t length = 0; length < header.size(); ++length) {
    INFO("the first " << length << " bytes of the header");
    CHECK_THROWS_WITH(decode<std::string>(full.substr(0, length)), Catch::Contains("Boost archive header"));
  }
  CHECK(signature_end < header.size());
}

// How dist_objects.hpp's templates turn a value into checked bytes and back: a Boost binary
// archive inside a checksummed envelope (magic, length, XXH3-64), read by an archive that refuses
// lengths larger than the bytes left. Not for direct use: only the *_object functions call it.
#pragma once

#include <cstddef>
#include <new>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include <boost/archive/archive_exception.hpp>
#include <boost/archive/binary_iarchive_impl.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/archive/detail/register_archive.hpp>
#include <boost/serialization/array_optimization.hpp>
#include <boost/serialization/collection_size_type.hpp>

#include "tensortree/error.hpp"
#include "tensortree/export.hpp"

namespace tensortree::dist::detail {

using Bytes = std::vector<std::byte>;

// The serialized value inside a checksummed envelope, and back (CorruptData on any failure).
TT_API Bytes seal(const std::string& archive);
TT_API std::string unseal(const Bytes& envelope);

template <class T>
Bytes to_bytes(const T& value) {
  std::ostringstream out;
  {
    boost::archive::binary_oarchive archive(out);
    archive << value;
  }
  return seal(out.str());
}

// Reads the caller's bytes in place, so the number of bytes left is always known.
class PayloadStreambuf : public std::streambuf {
 public:
  explicit PayloadStreambuf(std::string_view bytes) {
    // The get area is never written through: the default pbackfail refuses put-backs.
    char* first = const_cast<char*>(bytes.data());
    setg(first, first, first + bytes.size());
  }
  std::size_t remaining() const { return static_cast<std::size_t>(egptr() - gptr()); }
};

// Constructed before the archive base that reads from it (base-from-member).
struct PayloadSource {
  explicit PayloadSource(std::string_view bytes) : buffer(bytes) {}
  PayloadStreambuf buffer;
};

// Reads what binary_oarchive writes, but a container count or string length larger than the bytes
// left is CorruptData before anything is allocated for it: a payload that passed its checksum may
// still be hostile, and Boost's own loaders reserve whatever count they read. (So a container of
// elements that serialize to no bytes at all, such as empty structs, is limited to the bytes left.)
class TT_API BoundedBinaryIArchive
    : private PayloadSource,
      public boost::archive::binary_iarchive_impl<BoundedBinaryIArchive, char, std::char_traits<char>> {
  using Base = boost::archive::binary_iarchive_impl<BoundedBinaryIArchive, char, std::char_traits<char>>;

 public:
  explicit BoundedBinaryIArchive(std::string_view bytes) : PayloadSource(bytes), Base(buffer, 0) { init(0); }

  // Boost's dispatch calls these on the most derived archive.
  template <class T>
  void load_override(T& value) {
    Base::load_override(value);
  }
  void load_override(boost::serialization::collection_size_type& count) {
    Base::load_override(count);
    check_fits(count, "elements");
  }
  using Base::load;
  void load(std::string& text) {
    std::size_t length = 0;
    Base::load(length);
    check_fits(length, "characters");
    text.resize(length);
    if (length > 0) load_binary(text.data(), length);
  }

 private:
  void check_fits(std::size_t count, const char* what) const {
    if (count > buffer.remaining()) {
      throw CorruptData("object bytes claim " + std::to_string(count) + " " + what + " but only " +
                        std::to_string(buffer.remaining()) + " bytes remain");
    }
  }
};

// A payload can also be meant for another type: Boost then throws archive_exception, or a user
// type's own loader reserves an absurd length (length_error, bad_alloc). Each is CorruptData.
template <class T>
T from_bytes(const Bytes& envelope) {
  const std::string payload = unseal(envelope);
  try {
    BoundedBinaryIArchive archive(payload);
    T value;
    archive >> value;
    return value;
  } catch (const boost::archive::archive_exception& error) {
    throw CorruptData(std::string("object bytes do not decode as the expected type: ") + error.what());
  } catch (const std::length_error& error) {
    throw CorruptData(std::string("object bytes do not decode: a length in them cannot be (") + error.what() + ")");
  } catch (const std::bad_alloc&) {
    throw CorruptData("object bytes do not decode: a length in them is too large to allocate");
  }
}

}  // namespace tensortree::dist::detail

// As for binary_iarchive: exported types load through it, and arrays of primitives (the optimized
// vector format binary_oarchive writes) are read as one block.
BOOST_SERIALIZATION_REGISTER_ARCHIVE(tensortree::dist::detail::BoundedBinaryIArchive)
BOOST_SERIALIZATION_USE_ARRAY_OPTIMIZATION(tensortree::dist::detail::BoundedBinaryIArchive)

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
#include <type_traits>
#include <vector>

#include <boost/archive/archive_exception.hpp>
#include <boost/archive/binary_iarchive_impl.hpp>
#include <boost/archive/basic_archive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/archive/detail/register_archive.hpp>
#include <boost/serialization/array_optimization.hpp>
#include <boost/serialization/array_wrapper.hpp>
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

// What binary_oarchive writes before any value: its signature, this build's library version and
// the native sizes and byte order. Every sender of ours writes exactly these bytes.
inline const std::string& archive_header() {
  static const std::string header = [] {
    std::ostringstream out;
    { boost::archive::binary_oarchive archive(out); }
    return out.str();
  }();
  return header;
}

// Constructed before the archive base that reads from it (base-from-member), so the header is
// checked before Boost reads it: Boost's own header parsing asserts on a truncated version field,
// and older library versions take other paths through its loader (16-bit class ids, bools for
// tracking) that no sender of ours writes.
struct PayloadSource {
  explicit PayloadSource(std::string_view bytes) : buffer(checked_header(bytes)) {}
  PayloadStreambuf buffer;

 private:
  static std::string_view checked_header(std::string_view bytes) {
    if (!bytes.starts_with(archive_header())) {
      throw CorruptData("object bytes do not start with this build's Boost archive header (signature, library "
                        "version " + std::to_string(static_cast<unsigned>(boost::archive::BOOST_ARCHIVE_VERSION())) +
                        ", native sizes)");
    }
    return bytes;
  }
};

// An enum whose every value of the underlying type is a valid value: one with a fixed underlying
// type (scoped enums always have one). Loading any other enum from peer bytes could be undefined.
template <class E>
concept EnumWithFixedType = std::is_enum_v<E> && requires { E{std::underlying_type_t<E>{}}; };

template <class T>
inline constexpr bool kAlwaysFalse = false;

// Reads what binary_oarchive writes, and nothing a peer can use to corrupt memory; a payload that
// passed its checksum may still be hostile:
// - a container count or string length larger than the bytes left is CorruptData before anything
//   is allocated for it (Boost's own loaders reserve whatever count they read; so a container of
//   elements that serialize to no bytes at all, such as empty structs, is limited to the bytes left);
// - a bool that is neither 0 nor 1 is CorruptData (loading it would be undefined behaviour);
// - bytes that do not start with exactly the header our senders write are CorruptData
//   (PayloadSource);
// - types whose loading follows pointers (raw and smart pointers, hence polymorphic classes) and
//   unscoped enums without a fixed underlying type do not compile: Boost resolves pointers through
//   object ids and class ids taken from the bytes, and no check here could make that safe.
class TT_API BoundedBinaryIArchive
    : private PayloadSource,
      public boost::archive::binary_iarchive_impl<BoundedBinaryIArchive, char, std::char_traits<char>> {
  using Base = boost::archive::binary_iarchive_impl<BoundedBinaryIArchive, char, std::char_traits<char>>;

 public:
  explicit BoundedBinaryIArchive(std::string_view bytes) : PayloadSource(bytes), Base(buffer, 0) { init(0); }

  // Boost's dispatch calls these on the most derived archive.
  template <class T>
  void load_override(T& value) {
    static_assert(!std::is_enum_v<T> || EnumWithFixedType<T>,
                  "object collectives load enums only with a fixed underlying type (enum class, or enum E : int)");
    Base::load_override(value);
  }
  template <class T>
  void load_override(T*&) {
    static_assert(kAlwaysFalse<T>,
                  "object collectives refuse types that serialize pointers (raw, shared_ptr, unique_ptr, "
                  "polymorphic classes): a peer's bytes would steer Boost's pointer loading");
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
  void load(bool& flag) {
    unsigned char byte = 0;
    load_binary(&byte, 1);
    flag = checked_bool(byte);
  }
  // Arrays of primitives are read as one block; a bool array is read as bytes and checked first.
  template <class ValueType>
  void load_array(boost::serialization::array_wrapper<ValueType>& array, unsigned int version) {
    if constexpr (std::is_same_v<ValueType, bool>) {
      for (std::size_t i = 0; i < array.count(); ++i) load(array.address()[i]);
    } else {
      Base::load_array(array, version);
    }
  }

 private:
  static bool checked_bool(unsigned char byte) {
    if (byte > 1) throw CorruptData("object bytes hold a bool of value " + std::to_string(byte) + " (not 0 or 1)");
    return byte == 1;
  }
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

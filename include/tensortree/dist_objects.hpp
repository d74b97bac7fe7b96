// Collectives of serializable values: the C++ counterpart of torch.distributed's *_object
// functions. Any type Boost.Serialization can save and load (std containers of them included, via
// <boost/serialization/vector.hpp> and friends; user types through a serialize() member) and that
// is default-constructible. Bytes from a peer are untrusted: a stream that fails its envelope
// checks (magic, length, XXH3-64 checksum) or does not parse as the expected type is CorruptData.
// Arguments are checked as dist_ops checks them (InvalidArgument naming root, dst, src or tag);
// every call is synchronous.
#pragma once

#include <cstddef>
#include <new>
#include <span>
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
#include "tensortree/group.hpp"

namespace tensortree::dist {

namespace detail {

using Bytes = std::vector<std::byte>;

// Each carries one checksummed envelope of bytes per rank; sizes move in a small first round.
void broadcast_bytes(Bytes& bytes, int root, const Group& group);
std::vector<Bytes> all_gather_bytes(const Bytes& bytes, const Group& group);
// On the root, one envelope per rank; elsewhere empty.
std::vector<Bytes> gather_bytes(const Bytes& bytes, int root, const Group& group);
// `per_rank` is read on the root only; a root whose list is not one per rank fails every rank
// with InvalidArgument (the size round carries its verdict).
Bytes scatter_bytes(std::span<const Bytes> per_rank, int root, const Group& group);
void send_bytes(const Bytes& bytes, int dst, const Group& group, int tag);
// `src` may be kAnySource (backend.hpp): the size and the bytes then come from the same sender.
Bytes recv_bytes(int src, const Group& group, int tag);

// The serialized value inside a checksummed envelope, and back (CorruptData on any failure).
Bytes seal(const std::string& archive);
std::string unseal(const Bytes& envelope);

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
class BoundedBinaryIArchive
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

}  // namespace detail

template <class T>
void broadcast_object(T& value, int root, const Group& group) {
  detail::Bytes bytes = group.rank() == root ? detail::to_bytes(value) : detail::Bytes{};
  detail::broadcast_bytes(bytes, root, group);
  if (group.rank() != root) value = detail::from_bytes<T>(bytes);
}

template <class T>
std::vector<T> all_gather_object(const T& value, const Group& group) {
  std::vector<T> out;
  for (const auto& bytes : detail::all_gather_bytes(detail::to_bytes(value), group)) {
    out.push_back(detail::from_bytes<T>(bytes));
  }
  return out;
}

// On the root, one value per rank; elsewhere empty.
template <class T>
std::vector<T> gather_object(const T& value, int root, const Group& group) {
  std::vector<T> out;
  for (const auto& bytes : detail::gather_bytes(detail::to_bytes(value), root, group)) {
    out.push_back(detail::from_bytes<T>(bytes));
  }
  return out;
}

// The root passes one value per rank; every rank returns its own. Other ranks' `values` are
// ignored (pass an empty span).
template <class T>
T scatter_object(std::span<const T> values, int root, const Group& group) {
  std::vector<detail::Bytes> per_rank;
  if (group.rank() == root) {
    for (const T& value : values) per_rank.push_back(detail::to_bytes(value));
  }
  return detail::from_bytes<T>(detail::scatter_bytes(per_rank, root, group));
}

template <class T>
void send_object(const T& value, int dst, const Group& group, int tag = 0) {
  detail::send_bytes(detail::to_bytes(value), dst, group, tag);
}

template <class T>
T recv_object(int src, const Group& group, int tag = 0) {
  return detail::from_bytes<T>(detail::recv_bytes(src, group, tag));
}

}  // namespace tensortree::dist

// As for binary_iarchive: exported types load through it, and arrays of primitives (the optimized
// vector format binary_oarchive writes) are read as one block.
BOOST_SERIALIZATION_REGISTER_ARCHIVE(tensortree::dist::detail::BoundedBinaryIArchive)
BOOST_SERIALIZATION_USE_ARRAY_OPTIMIZATION(tensortree::dist::detail::BoundedBinaryIArchive)

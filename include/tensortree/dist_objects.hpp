// Collectives of serializable values: the C++ counterpart of torch.distributed's *_object
// functions. Any type Boost.Serialization can save and load (std containers of them included, via
// <boost/serialization/vector.hpp> and friends; user types through a serialize() member) and that
// is default-constructible. Bytes from a peer are untrusted: a stream that fails its envelope
// checks (magic, length, XXH3-64 checksum) or does not parse as the expected type is CorruptData,
// and so is a bool that is not 0 or 1. Types whose loading follows pointers (raw and smart
// pointers, polymorphic classes) and enums without a fixed underlying type do not compile as
// received values: no check on peer bytes could make Boost's pointer loading safe.
// Arguments are checked as dist_ops checks them (InvalidArgument naming src, dst or tag);
// every call is synchronous.
#pragma once

#include <span>
#include <vector>

#include "tensortree/comm_options.hpp"
#include "tensortree/detail/object_archive.hpp"
#include "tensortree/export.hpp"
#include "tensortree/group.hpp"

namespace tensortree::dist {

namespace detail {

// Each carries one checksummed envelope of bytes per rank; sizes move in a small first round.
TT_API void broadcast_bytes(Bytes& bytes, int src, const Group& group);
TT_API std::vector<Bytes> all_gather_bytes(const Bytes& bytes, const Group& group);
// On rank dst, one envelope per rank; elsewhere empty.
TT_API std::vector<Bytes> gather_bytes(const Bytes& bytes, int dst, const Group& group);
// `per_rank` is read on rank src only; a src whose list is not one per rank fails every rank
// with InvalidArgument (the size round carries its verdict).
TT_API Bytes scatter_bytes(std::span<const Bytes> per_rank, int src, const Group& group);
TT_API void send_bytes(const Bytes& bytes, int dst, const Group& group, int tag);
// `src` may be kAnySource (peer_transport.hpp): the size and the bytes then come from the same sender.
TT_API Bytes recv_bytes(int src, const Group& group, int tag);

}  // namespace detail

template <class T>
void broadcast_object(T& value, int src, const Group& group) {
  detail::Bytes bytes = group.rank() == src ? detail::to_bytes(value) : detail::Bytes{};
  detail::broadcast_bytes(bytes, src, group);
  if (group.rank() != src) value = detail::from_bytes<T>(bytes);
}

template <class T>
std::vector<T> all_gather_object(const T& value, const Group& group) {
  std::vector<T> out;
  for (const auto& bytes : detail::all_gather_bytes(detail::to_bytes(value), group)) {
    out.push_back(detail::from_bytes<T>(bytes));
  }
  return out;
}

// On rank dst, one value per rank; elsewhere empty.
template <class T>
std::vector<T> gather_object(const T& value, int dst, const Group& group) {
  std::vector<T> out;
  for (const auto& bytes : detail::gather_bytes(detail::to_bytes(value), dst, group)) {
    out.push_back(detail::from_bytes<T>(bytes));
  }
  return out;
}

// Rank src passes one value per rank; every rank returns its own. Other ranks' `values` are
// ignored (pass an empty span).
template <class T>
T scatter_object(std::span<const T> values, int src, const Group& group) {
  std::vector<detail::Bytes> per_rank;
  if (group.rank() == src) {
    for (const T& value : values) per_rank.push_back(detail::to_bytes(value));
  }
  return detail::from_bytes<T>(detail::scatter_bytes(per_rank, src, group));
}

template <class T>
void send_object(const T& value, int dst, const Group& group, const CommOptions& options = {}) {
  detail::send_bytes(detail::to_bytes(value), dst, group, options.tag);
}

template <class T>
T recv_object(int src, const Group& group, const CommOptions& options = {}) {
  return detail::from_bytes<T>(detail::recv_bytes(src, group, options.tag));
}

}  // namespace tensortree::dist

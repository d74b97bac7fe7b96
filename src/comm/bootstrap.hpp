// Bootstrap: what the ranks of a group need to find each other and to build everything else
// (gloo's Store): who am I, how many are we, small blocking exchanges, sub-groups. Transports are
// created over it; tensors never travel through it. MPI provides one (transport/mpi).
//
// Every call but rank() and size() is collective over the group: each member calls it, in the
// same order, with arguments of the same length.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace tensortree::detail {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Every member's `mine` (the same length everywhere), concatenated in rank order.
  virtual std::vector<std::byte> all_gather(std::span<const std::byte> mine) = 0;
  // `bytes` of rank `root` into `bytes` of every other member.
  virtual void broadcast(std::span<std::byte> bytes, int root) = 0;
  virtual void barrier() = 0;
  // The members passing the same non-negative `color` form one sub-group, ranked by `key` (then by
  // rank here); a member passing a negative color gets null.
  virtual std::unique_ptr<Bootstrap> split(int color, int key) = 0;
};

}  // namespace tensortree::detail

// Group: a set of ranks that communicate together, with the transports that move tensors between
// them. Cheap to copy: copies share one state (bootstrap, transports, options, attachments).
// Groups come from a DistributedContext (world(), new_group) or a DeviceMesh.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensortree/collectives.hpp"
#include "tensortree/device.hpp"
#include "tensortree/export.hpp"
#include "tensortree/peer_transport.hpp"

namespace tensortree {

namespace detail {
class GroupState;
class GroupAccess;
}  // namespace detail

// What carries a group's host tensors between two members. Collectives always go over MPI.
enum class HostTransport : unsigned char {
  // Shared memory between members on one node whose processes can map each other's memory, MPI
  // between the others.
  Auto,
  Mpi,           // MPI for every pair, as between separate hosts (the TCP test run forces it)
  SharedMemory,  // as Auto, but InvalidArgument where two members on one node cannot map each other's memory
};

// What carries a group's CUDA tensors.
enum class CudaTransport : unsigned char {
  // Collectives: NCCL where it can serve the group (built in, every member bound to a GPU of its
  // own), staging through pinned host memory over MPI otherwise (NCCL refuses two ranks on one
  // GPU). Point to point: CUDA IPC between members bound to one GPU, the collectives' transport
  // between the others.
  Auto,
  Nccl,    // NCCL or InvalidArgument, on every member, when the group's first CUDA transfer needs it
  Staged,  // pinned host memory over MPI for everything, even where NCCL or CUDA IPC could serve
};

// The options a group runs with: every field set. Group::options() returns them; the defaults
// here are the library's.
struct TT_API ResolvedGroupOptions {
  // The longest a blocking wait on one of the group's operations may last before it throws
  // Timeout (naming the operation, the peer and this limit). Positive.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);

  // The most bytes this rank allocates for a message whose size only a peer's bytes vouch for: a
  // new tree arriving in from_remote_init, a broadcast into an empty tree, gathered blocks, object
  // payloads, variadic-shape tensors, a message of unknown length. A larger claim (or one whose
  // sum overflows) is CorruptData naming the peer, the bytes claimed and this limit, raised before
  // anything is allocated; raise the limit for larger legitimate messages. Where this rank already
  // holds a tree of the sender's layout the claim must match that layout instead, whatever this
  // limit. A refused claim does not take part in the transfer the sender started, so give every
  // rank of a group the same limit.
  std::uint64_t max_message_bytes = std::uint64_t{1} << 30;

  // Debug mode, as PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL: before each dist_ops collective the
  // ranks compare operation, root, reduction, dtype and shape, and their own argument checks, in
  // one small extra round; a difference is InvalidArgument on every rank naming the ranks that
  // differ, instead of wrong values, an aborted job or a rank left waiting. Point-to-point
  // transfers carry the sender's dtype and shape, and a receiver whose tensor differs throws
  // InvalidArgument naming both. A consolidated tree send carries its layout ahead of its data (as
  // init_remote does), and a tree receive takes and checks that layout before the data (in its
  // call, irecv too), so that a receiver of another layout is told the first key that differs.
  // Every rank of a group must agree on it.
  bool debug_checks = false;

  // See HostTransport and CudaTransport. Every member of a group must pass the same.
  // Group::transport(peer, device).name() tells which one serves a peer.
  HostTransport host_transport = HostTransport::Auto;
  CudaTransport cuda_transport = CudaTransport::Auto;
};

// What a group's operations default to, as the caller asks: a field left unset takes its
// environment variable's value where that is set, the default of ResolvedGroupOptions otherwise.
// So `{.timeout = 30s}` changes the timeout and keeps every TENSORTREE_* setting of the others.
struct TT_API GroupOptions {
  std::optional<std::chrono::milliseconds> timeout = std::nullopt;  // TENSORTREE_TIMEOUT_MS (positive)
  std::optional<std::uint64_t> max_message_bytes = std::nullopt;    // TENSORTREE_MAX_MESSAGE_BYTES (positive)
  // TENSORTREE_DISTRIBUTED_DEBUG: OFF, INFO or DETAIL (on). Where this is unset the variable is read
  // again at each operation, so a program may turn it on for a stretch of calls.
  std::optional<bool> debug_checks = std::nullopt;
  std::optional<HostTransport> host_transport = std::nullopt;  // TENSORTREE_HOST_TRANSPORT: auto|mpi|shm
  std::optional<CudaTransport> cuda_transport = std::nullopt;  // TENSORTREE_CUDA_TRANSPORT: auto|nccl|staged

  // Every field: this one's where set, else its variable's, else the default. InvalidArgument
  // naming the variable and its value for a variable set to anything else, and for a timeout that
  // is not positive. DistributedContext and new_group call it before anything else.
  ResolvedGroupOptions resolve() const;
};

class TT_API Group {
 public:
  Group() = default;

  // This process's rank in the group, or -1 when it is not a member.
  int rank() const;
  int size() const;
  bool is_member() const { return rank() >= 0; }
  // The world rank of each member, in group-rank order.
  const std::vector<int>& world_ranks() const;
  // The options the group runs with, as resolved when it was made (an empty Group's are the
  // defaults).
  const ResolvedGroupOptions& options() const;

  // The group's collectives on `device`: MPI for the CPU (the in-process engine for a group of
  // threads); NCCL for CUDA where the library was built with it (its communicator is created on
  // first use, collectively), otherwise MPI staging through pinned host memory. While one waits,
  // this rank keeps taking what its peers send it through that device's shared-memory transport.
  // InvalidArgument on a rank that is not a member.
  Collectives& collectives(Device device) const;
  // The transport that moves point-to-point traffic between this rank and group rank `peer` on
  // `device`: each pair of ranks may be served by a different transport. InvalidArgument for a
  // peer outside the group.
  PeerTransport& transport(int peer, Device device) const;
  // The transport that takes receives from kAnySource on `device` (capabilities().any_source says
  // whether it can).
  PeerTransport& any_source_transport(Device device) const;

  // Ends this rank's use of the group, for when a peer is gone or a Timeout left the ranks out of
  // step. Every transport of the group is told (NCCL aborts its communicator); waits in flight, on
  // any thread, end with BackendError naming `reason`; a Work dropped afterwards abandons its
  // transfer (keeping its buffers) instead of waiting for it; every later operation on any copy of
  // the group throws BackendError. Local to this rank (the others are not told) and to this group
  // (groups split from it are not aborted). Never blocks and cannot be undone: make new groups,
  // or end the process. A no-op for an empty Group or a non-member.
  void abort(const std::string& reason) const;
  // Whether abort() was called on this rank (on any copy of the group).
  bool is_aborted() const;

 private:
  friend class detail::GroupAccess;
  explicit Group(std::shared_ptr<detail::GroupState> state);

  std::shared_ptr<detail::GroupState> state_;
};

}  // namespace tensortree

// What the dist_ops files (dist_collectives, dist_all_to_all, dist_p2p, dist_variadic, dist_objects)
// share: argument checks, byte views of tensors, the fixed-size tensor header of the small rounds,
// the point-to-point data round, and the shapes of per-rank outputs. Defined in dist_internal.cpp.
#pragma once

#include <array>
#include <functional>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/collectives.hpp"
#include "tensortree/peer_transport.hpp"
#include "tensortree/group.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/work.hpp"

namespace tensortree::dist::detail {

// ---- argument checks: each throws InvalidArgument naming the operation and the argument ----------
[[noreturn]] void invalid(std::string_view op, const std::string& message);
// The first reason `tensors` is not one tensor per rank of a single shape, dtype and device; empty
// when there is none. scatter sends it to its receivers instead of throwing at once.
std::string per_rank_list_problem(std::span<const Tensor> tensors, std::string_view name, const Group& group);
// This process is a member of `group` (the transports exist only for members).
void check_member(const Group& group, std::string_view op);

// The transport serving `peer` (Group::transport), or for kAnySource the one that takes receives
// from any member (Group::any_source_transport).
PeerTransport& peer_transport(const Group& group, int peer, Device device);
// The group's point to point with `peer` (may be kAnySource): `post` posts on peer_transport,
// and its Work goes through the progress hooks of the group's other transports (GroupState::progressing), so that waiting on it still takes what other peers send.
using PostOn = std::function<WorkPtr(PeerTransport&)>;
WorkPtr post_to_peer(const Group& group, int peer, Device device, const char* operation, const PostOn& post);
// `ops` (one device's tensors, peers of the group) posted as one batch per transport serving them,
// each through the others' progress hooks; completes when all have.
WorkPtr post_batch(const Group& group, std::span<const P2POp> ops);
// `rank` (named `name`: "root", "dst", "src") is a rank of `group`.
void check_rank(int rank, std::string_view name, const Group& group, std::string_view op);
void check_defined(const Tensor& tensor, std::string_view name, std::string_view op);
// A point-to-point tag the caller may use: 0..kMaxUserTag.
void check_tag(int tag, std::string_view name, std::string_view op);
// One tensor per rank of `group`, all defined and of one shape, dtype and device.
void check_per_rank_list(std::span<const Tensor> tensors, std::string_view name, const Group& group,
                         std::string_view op);

// The CPU collectives carry every small round (sizes, shapes, dtypes): it is host data whatever
// device the payload lives on. Its point-to-point messages go on the CPU transports the same way.
Collectives& metadata_collectives(const Group& group);

// A 1-D int64 CPU tensor holding `values` (a copy).
Tensor int64_tensor(std::span<const std::int64_t> values);
std::vector<std::int64_t> int64_values(const Tensor& tensor);

// ---- the fixed-size description of a tensor that the small rounds carry ---------------------------
struct TensorHeader {
  DeviceType device_type = DeviceType::CPU;
  DType dtype = DType::Float32;
  Shape shape;

  static TensorHeader of(const Tensor& tensor);
  std::size_t nbytes() const;
};

// Variadic shapes travel in fixed-size records, so one collective moves every rank's.
inline constexpr std::size_t kMaxHeaderDims = 16;
inline constexpr std::size_t kHeaderWords = 3 + kMaxHeaderDims;
using HeaderWords = std::array<std::int64_t, kHeaderWords>;

// InvalidArgument when the tensor has more than kMaxHeaderDims dimensions.
HeaderWords encode_header(const TensorHeader& header, std::string_view op);
// The record sent by `sender` (a group rank, for the message); CorruptData for values no tensor has.
TensorHeader decode_header(std::span<const std::int64_t> words, int sender);

// Where this rank keeps a tensor of that kind: the CPU, or its current CUDA device.
Device device_of_kind(DeviceType type);

// One allocation holding a tensor per header, each starting on a 64-byte boundary.
std::vector<Tensor> allocate_blocks(std::span<const TensorHeader> headers, Device device);

// ---- the announcement round --------------------------------------------------------------------------
// The root's `words` (this rank's are ignored elsewhere; same length on every rank) reach every rank
// in one small broadcast on the CPU collectives: what the root tells before data moves (its verdict on
// its arguments, sizes, shapes, layouts). Returns what the root sent.
std::vector<std::int64_t> announce_words(std::span<const std::int64_t> words, int root, const Group& group);

// ---- the shapes of per-rank outputs -----------------------------------------------------------------
// The first tensor of a per-rank list, for the debug round; null when the list is empty.
const Tensor* first_of(std::span<const Tensor> tensors);
// `shape` behind a new leading dimension of `leading`.
Shape with_leading(std::int64_t leading, const Shape& shape);
Tensor empty_like_shape(Shape shape, const Tensor& like);
// Each rank's block of a [group size, ...] buffer.
std::vector<Tensor> blocks_of(const Tensor& stacked);
// rows * factor, InvalidArgument naming `op` when it overflows int64.
std::int64_t rows_times(std::int64_t rows, std::int64_t factor, std::string_view op);

// ---- the point-to-point data round -----------------------------------------------------------------
// Tags at or above this are dist_ops' own (user tags stay below; see kMaxUserTag in dist_ops.hpp).
inline constexpr int kInternalTag = 32001;

// Sends and receives of byte views posted together; empty transfers are left out, as both ends
// know the sizes.
class ByteExchange {
 public:
  void send(const Tensor& contiguous, int peer);
  void recv(const Tensor& contiguous, int peer);
  // Posts every transfer on the transports of `group` that serve their peers (post_batch); the
  // Work keeps the tensors alive.
  WorkPtr post(const Group& group) const;

 private:
  std::vector<P2POp> ops_;
};

// An in-place result that travelled through a packed copy of the caller's non-contiguous view.
struct CopyBack {
  Tensor destination;
  Tensor packed;
};
// A Work that completes with `work` and then writes every packed copy back into its destination;
// `work` itself when there is nothing to copy. It forwards source_rank().
WorkPtr then_copy_back(WorkPtr work, std::vector<CopyBack> copies);
// The same for one tensor; nothing to copy when `packed` is the caller's own memory.
WorkPtr then_copy_back(WorkPtr work, const Tensor& destination, const Tensor& packed);

}  // namespace tensortree::dist::detail

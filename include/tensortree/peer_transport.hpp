// PeerTransport: how this rank moves tensors to and from one peer of a group (gloo's
// transport::Pair), for one kind of memory. A group keeps one per peer and device (MPI, shared
// memory, CUDA IPC, NCCL, staging, in-process); several peers may share one. Contract as for
// Collectives: group ranks, contiguous tensors on the transport's kind of device, Works that keep
// their tensors alive, NotSupported("<name> does not support <op>") for what a transport lacks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tensortree/device.hpp"
#include "tensortree/export.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/transport_capabilities.hpp"
#include "tensortree/work.hpp"

namespace tensortree {

// Receive from whichever rank sends first; Work::source_rank() then says who it was.
inline constexpr int kAnySource = -1;

// One send or receive of a batch posted together (batch_p2p).
struct P2POp {
  enum class Kind : unsigned char { Send, Recv };
  Kind kind;
  Tensor tensor;
  int peer;
  int tag = 0;
};

// A message whose length the receiver did not know: its bytes (a 1-D uint8 CPU tensor) and sender.
struct ReceivedMessage {
  Tensor bytes;
  int source = -1;
};

// Where a matched message goes (PeerTransport::recv_matched): given its sender (a group rank) and
// length, a 1-D uint8 host tensor of exactly `bytes` to receive it into. Throws to refuse the message.
using ChooseDestination = std::function<Tensor(int source, std::uint64_t bytes)>;

class TT_API PeerTransport {
 public:
  virtual ~PeerTransport() = default;

  virtual std::string_view name() const = 0;
  virtual TransportCapabilities capabilities() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  [[nodiscard]] virtual WorkPtr send(const Tensor& tensor, int dst, int tag);
  // `src` may be kAnySource where capabilities().any_source.
  [[nodiscard]] virtual WorkPtr recv(const Tensor& tensor, int src, int tag);
  // Blocks until a message from `src` (may be kAnySource) has arrived, then receives it whole into
  // a host buffer of its length (MPI probes it first). For messages that announce what follows.
  virtual ReceivedMessage recv_message(int src, int tag);
  // The nonblocking recv_message: matches the next message from `src` (may be kAnySource), bounds
  // its length by the group's max_message_bytes, asks `choose` where it goes, and receives it
  // there. Work::source_rank() says who sent. For receives whose sender decides the form of the
  // message (the node-local transport's frames next to plain messages from other nodes).
  [[nodiscard]] virtual WorkPtr recv_matched(int src, int tag, ChooseDestination choose);
  // Memory on `device` for a buffer this transport will send from, in the form it moves fastest (a
  // node-local transport sends from its shared memory without copying it). The default allocates
  // ordinary memory.
  virtual std::shared_ptr<Storage> allocate_message_buffer(std::size_t nbytes, Device device);
  // Every operation posted at once; completes when all have.
  [[nodiscard]] virtual WorkPtr batch_p2p(std::span<const P2POp> ops);

  // The progress hook: `work`, an operation of another transport (the group's collectives), made
  // to move this transport's posted receives along whenever it is polled or waited on. A
  // transport whose frames move only inside its own polls (shared memory) needs this, since a
  // peer may wait on its send to this rank before it joins the collective. The default returns
  // `work` as it is. `operation` names it in a Timeout.
  [[nodiscard]] virtual WorkPtr progressing(WorkPtr work, const char* operation);

  // Ends this rank's use of the transport (Group::abort), as Collectives::abort.
  virtual void abort(const std::string& reason);
};

}  // namespace tensortree

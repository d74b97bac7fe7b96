// TransportCapabilities: what a Collectives or PeerTransport can do, for code that must choose
// (never compare transport names).
#pragma once

namespace tensortree {

struct TransportCapabilities {
  bool any_source = false;              // recv and irecv accept kAnySource
  bool unknown_length_messages = false;  // recv_message; a receive longer than the message is an error
  bool bitwise_reductions = false;       // ReduceOp::BitwiseAnd/Or/Xor
  bool host_memory = false;              // moves tensors in host memory
  bool cuda_memory = false;              // moves tensors in CUDA device memory
  bool ordered_by_posting = false;       // matches messages in posting order and ignores tags
};

}  // namespace tensortree

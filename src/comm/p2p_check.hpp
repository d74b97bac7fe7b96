// Debug mode for point to point (GroupOptions::debug_checks, TENSORTREE_DISTRIBUTED_DEBUG=DETAIL):
// each send is preceded, on the same transport, peer and tag, by a small header saying the
// sender's rank, dtype and shape; the receive takes the header before the data and compares it
// with its own tensor. So a float64 tensor sent into a float32 receiver of the same bytes is
// InvalidArgument on the receiver naming both dtypes and shapes, instead of wrong values. Every
// rank of the group must agree on debug mode (headers and data must pair up). Off, nothing is sent.
#pragma once

#include <string_view>

#include "tensortree/group.hpp"
#include "tensortree/tensor.hpp"

namespace tensortree::dist::detail {

// The header a send of `tensor` by group rank `sender` goes with, on the tensor's device.
Tensor p2p_header(const Tensor& tensor, int sender);
// Where the header of a receive into `tensor` lands (on the tensor's device).
Tensor p2p_header_buffer(const Tensor& tensor);
// The rank that sent a received header (for a receive from any source), or -1 where it is garbled.
int p2p_header_sender(const Tensor& header);
// Whether the data after `header` is as many bytes as `tensor` holds (a receive can take it).
bool p2p_header_bytes_match(const Tensor& header, const Tensor& tensor);
// InvalidArgument, naming `op`, this rank, the sender, and both dtypes and shapes, when `header`
// (received) does not describe a tensor of `tensor`'s dtype and shape.
void check_p2p_header(const Tensor& header, const Tensor& tensor, const Group& group, std::string_view op);

}  // namespace tensortree::dist::detail

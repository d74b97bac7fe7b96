// CommOptions: the one options struct of point-to-point transfers, for tensors (dist::send and the
// rest) and whole trees (TensorTree::send, init_remote and the rest). It has no timeout: a Work's
// wait(timeout) bounds a wait today, and a per-group default timeout belongs to the Group.
#pragma once

#include "tensortree/cuda_stream.hpp"

namespace tensortree {

enum class TransferMode : unsigned char {
  // The whole tree as one message: consolidated buffer + wire header (checked by the receiver).
  Consolidated,
  // One message per leaf, in layout order, without a header (TensorDict's default; kept for
  // comparison). The receiver's leaves are written as the messages arrive; only each message's
  // length is checked.
  PerLeaf,
};

struct CommOptions {
  // 0..dist::kMaxUserTag; NCCL matches messages in posting order and ignores it.
  int tag = 0;
  // Trees only: how a tree travels (plain tensors are always one message).
  TransferMode mode = TransferMode::Consolidated;
  // Trees only: threads for unpacking into a receiver that is not consolidated (0: a sensible count).
  int threads = 0;
  // CUDA tensors: the stream whose queued work the transfer waits for (one that wrote the tensor);
  // null: this thread's current stream (cuda_stream.hpp). Work::make_stream_wait orders the other way.
  CudaStreamHandle stream = nullptr;
};

}  // namespace tensortree

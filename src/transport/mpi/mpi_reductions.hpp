// How MPI reduces each dtype with each ReduceOp, following the shared rules of
// comm/reduction_rules.hpp: MPI's predefined operations where MPI knows the element type, logical
// ones for bool, and operations of its own for the 16- and 8-bit floats, which MPI cannot reduce.
#pragma once

#include <mpi.h>

#include <map>
#include <mutex>
#include <utility>

#include "transport/mpi/mpi_handles.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/reduce_op.hpp"

namespace tensortree::detail {

// The datatype and operation that reduce a dtype with an op on MPI, and whether the result must be
// divided by the group size afterwards (Avg).
struct MpiReduction {
  MPI_Datatype datatype;
  MPI_Op op;
  bool average;
};

// The reductions of one backend. Thread-safe; the operations it creates live as long as it does.
class MpiReductions {
 public:
  // NotSupported naming `rank`, the dtype and the operation when the rules refuse them.
  MpiReduction resolve(DType dtype, ReduceOp op, int rank);

 private:
  MPI_Op widened_op(DType dtype, ReduceOp op);

  std::mutex mutex_;
  // Created on first use: the reductions of 16- and 8-bit floats, which MPI does not know.
  std::map<std::pair<DType, ReduceOp>, MpiOp> widened_ops_;
};

}  // namespace tensortree::detail

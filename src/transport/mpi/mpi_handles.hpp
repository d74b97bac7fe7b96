// Owning, move-only wrappers for the MPI handles the library creates: communicators, derived
// datatypes and user-defined reduction operations. A handle is released in the destructor unless
// MPI has already been finalised (a Group copy may outlive the DistributedContext), and never throws.
#pragma once

#include <mpi.h>

#include <utility>

namespace tensortree::detail {

inline bool mpi_is_finalized() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

template <class Traits>
class MpiHandle {
 public:
  using Raw = typename Traits::Raw;

  MpiHandle() noexcept : raw_(Traits::null()) {}
  explicit MpiHandle(Raw raw) noexcept : raw_(raw) {}
  MpiHandle(MpiHandle&& other) noexcept : raw_(std::exchange(other.raw_, Traits::null())) {}
  MpiHandle& operator=(MpiHandle&& other) noexcept {
    if (this != &other) {
      release();
      raw_ = std::exchange(other.raw_, Traits::null());
    }
    return *this;
  }
  MpiHandle(const MpiHandle&) = delete;
  MpiHandle& operator=(const MpiHandle&) = delete;
  ~MpiHandle() { release(); }

  Raw get() const noexcept { return raw_; }
  bool valid() const noexcept { return raw_ != Traits::null(); }

 private:
  void release() noexcept {
    if (valid() && !mpi_is_finalized()) Traits::free(&raw_);
    raw_ = Traits::null();
  }

  Raw raw_;
};

struct CommTraits {
  using Raw = MPI_Comm;
  static Raw null() noexcept { return MPI_COMM_NULL; }
  static void free(Raw* raw) noexcept { MPI_Comm_free(raw); }
};

struct DatatypeTraits {
  using Raw = MPI_Datatype;
  static Raw null() noexcept { return MPI_DATATYPE_NULL; }
  static void free(Raw* raw) noexcept { MPI_Type_free(raw); }
};

struct OpTraits {
  using Raw = MPI_Op;
  static Raw null() noexcept { return MPI_OP_NULL; }
  static void free(Raw* raw) noexcept { MPI_Op_free(raw); }
};

using MpiComm = MpiHandle<CommTraits>;
using MpiDatatype = MpiHandle<DatatypeTraits>;
using MpiOp = MpiHandle<OpTraits>;

}  // namespace tensortree::detail

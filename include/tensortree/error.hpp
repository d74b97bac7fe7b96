// One exception hierarchy for the whole library: callers catch tensortree::Error or a precise subtype.
#pragma once

#include <stdexcept>
#include <string>

#include "tensortree/export.hpp"

namespace tensortree {

class TT_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed something the operation cannot accept (shape, dtype, rank, root, list length...).
class TT_API InvalidArgument : public Error {
 public:
  using Error::Error;
};

// Two sides disagree on the layout of a tree (fingerprints, sizes, structure).
class TT_API SchemaMismatch : public Error {
 public:
  using Error::Error;
};

// Bytes from a peer or a file violate the format; never trusted, never crash.
class TT_API CorruptData : public Error {
 public:
  using Error::Error;
};

// A foreign API (CUDA, NCCL, MPI, the OS) reported failure; the message holds its text and file:line.
class TT_API BackendError : public Error {
 public:
  using Error::Error;
};

// A wait ran past its deadline.
class TT_API Timeout : public Error {
 public:
  using Error::Error;
};

// The peer of a connection went away: it died, closed its end, or the connection broke. Only the
// connection it served is over (a tree channel); the caller and its other connections carry on.
class TT_API PeerLost : public Error {
 public:
  using Error::Error;
};

// The peer closed the connection in order (a tree channel's close()): everything it sent before
// was delivered, and this end's calls on the connection end with this, never with PeerLost.
class TT_API ChannelClosed : public Error {
 public:
  using Error::Error;
};

// The operation exists but not for this backend, device or dtype, or the library was built without it.
class TT_API NotSupported : public Error {
 public:
  using Error::Error;
};

}  // namespace tensortree

#include "transport/mpi/mpi_transports.hpp"

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/transport_choice.hpp"
#include "transport/mpi/mpi_backend.hpp"
#include "transport/mpi/mpi_bootstrap.hpp"
#include "transport/staged/staged_backend.hpp"
#include "tensortree/config.hpp"
#include "tensortree/error.hpp"

#if TT_HAVE_NCCL
#include "transport/nccl/nccl_backend.hpp"
#endif

namespace tensortree::detail {

namespace {

DeviceTransports everyone(std::shared_ptr<Backend> backend, int size) {
  DeviceTransports transports{backend, std::vector<std::shared_ptr<Backend>>(static_cast<std::size_t>(size), backend)};
  return transports;
}

std::shared_ptr<Backend> host_transport(GroupState& group) {
  auto* mpi = dynamic_cast<MpiBootstrap*>(&group.bootstrap());
  if (!mpi) throw NotSupported("the MPI transport needs a group whose bootstrap is MPI");
  return std::make_shared<MpiBackend>(mpi->comm(), MpiBackendOptions{.timeout = group.options().timeout, .max_message_bytes = group.options().max_message_bytes});
}

// Creating a NCCL communicator is collective over the group: group rank 0 makes the unique id and
// the bootstrap carries it to the others.
std::shared_ptr<Backend> nccl_transport(GroupState& group, Device device) {
#if TT_HAVE_NCCL
  Bootstrap& bootstrap = group.bootstrap();
  return make_nccl_backend(group.rank(), group.size(), device.index(), group.options().timeout,
                           [&bootstrap](std::span<std::byte> unique_id) { bootstrap.broadcast(unique_id, 0); });
#else
  (void)device;
  throw NotSupported("NCCL for the group of size " + std::to_string(group.size()) +
                     ": the library was built without it");
#endif
}

// Staged over a host transport of its own on the group's communicator, which it keeps alive.
std::shared_ptr<Backend> staged_transport(GroupState& group) {
  std::shared_ptr<Backend> host = host_transport(group);
  Backend& borrowed = *host;
  return std::shared_ptr<Backend>(new StagedBackend(borrowed), [host](Backend* staged) { delete staged; });
}

// Every member decides alike, from the placements they all hold.
std::shared_ptr<Backend> cuda_transport(GroupState& group, Device device) {
  const CudaTransportChoice choice =
      choose_cuda_transport(group.placements(), TT_HAVE_NCCL != 0, group.options().cuda_transport);
  if (choice.kind == CudaTransportKind::Nccl) return nccl_transport(group, device);
  return staged_transport(group);
}

}  // namespace

DeviceTransports MpiTransportFactory::create(GroupState& group, Device device) {
  if (device.is_cpu()) return everyone(host_transport(group), group.size());
  return everyone(cuda_transport(group, device), group.size());
}

}  // namespace tensortree::detail

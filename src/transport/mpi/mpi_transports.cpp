#include "transport/mpi/mpi_transports.hpp"

#include <memory>
#include <span>
#include <vector>

#include "transport/mpi/mpi_backend.hpp"
#include "transport/mpi/mpi_bootstrap.hpp"
#include "tensortree/config.hpp"
#include "tensortree/error.hpp"

#if TT_HAVE_NCCL
#include "transport/nccl/nccl_backend.hpp"
#else
#include "transport/staged/staged_backend.hpp"
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

#if TT_HAVE_NCCL
// Creating a NCCL communicator is collective over the group: group rank 0 makes the unique id and
// the bootstrap carries it to the others.
std::shared_ptr<Backend> cuda_transport(GroupState& group, Device device) {
  Bootstrap& bootstrap = group.bootstrap();
  return make_nccl_backend(group.rank(), group.size(), device.index(), group.options().timeout,
                           [&bootstrap](std::span<std::byte> unique_id) { bootstrap.broadcast(unique_id, 0); });
}
#else
// Staged over a host transport of its own on the group's communicator, which it keeps alive.
std::shared_ptr<Backend> cuda_transport(GroupState& group, Device) {
  std::shared_ptr<Backend> host = host_transport(group);
  Backend& borrowed = *host;
  return std::shared_ptr<Backend>(new StagedBackend(borrowed), [host](Backend* staged) { delete staged; });
}
#endif

}  // namespace

DeviceTransports MpiTransportFactory::create(GroupState& group, Device device) {
  if (device.is_cpu()) return everyone(host_transport(group), group.size());
  return everyone(cuda_transport(group, device), group.size());
}

}  // namespace tensortree::detail

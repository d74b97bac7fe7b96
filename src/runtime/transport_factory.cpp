#include "runtime/transport_factory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/transport_choice.hpp"
#include "core/text_format.hpp"
#include "transport/in_process/in_process_backend.hpp"
#include "transport/mpi/mpi_environment.hpp"
#include "transport/shm/cuda_shareable_memory.hpp"
#include "transport/shm/host_shareable_memory.hpp"
#include "transport/shm/node_local_backend.hpp"
#include "transport/staged/staged_backend.hpp"
#include "tensortree/config.hpp"
#include "tensortree/error.hpp"

#if TT_HAVE_NCCL
#include "transport/nccl/nccl_backend.hpp"
#endif

namespace tensortree::detail {

namespace {

// One engine for everything: its collectives, every peer, and receives from any source (it sees
// every member's messages).
DeviceTransports everyone(const std::shared_ptr<Engine>& engine, int size) {
  return {engine, std::vector<std::shared_ptr<PeerTransport>>(static_cast<std::size_t>(size), engine), engine};
}

// The host engine of the bootstrap's kind: MPI's communicator, or the mailboxes of an in-process
// group (HostTransport::Mpi then means this engine: the one that serves members without shared memory).
std::shared_ptr<Engine> host_transport(GroupState& group) {
  if (is_in_process(group.bootstrap())) {
    return make_in_process_backend(group.bootstrap(), group.options().timeout, group.options().max_message_bytes);
  }
  return make_mpi_backend(group.bootstrap(), group.options().timeout, group.options().max_message_bytes);
}

// Creating a NCCL communicator is collective over the group: group rank 0 makes the unique id and
// the bootstrap carries it to the others.
std::shared_ptr<Engine> nccl_transport(GroupState& group, Device device) {
#if TT_HAVE_NCCL
  Bootstrap& bootstrap = group.bootstrap();
  return make_nccl_backend(group.rank(), group.size(), device.index(), group.options().timeout,
                           [&bootstrap](std::span<std::byte> unique_id) { bootstrap.broadcast(unique_id, 0); });
#else
  (void)device;
  throw NotSupported(fmt::format("NCCL for the group of size {}: the library was built without it", group.size()));
#endif
}

// Staged over `host` (on the group's communicator), which it keeps alive.
std::shared_ptr<Engine> staged_transport(std::shared_ptr<Engine> host) {
  Engine& borrowed = *host;
  return std::shared_ptr<Engine>(new StagedBackend(borrowed), [host](Engine* staged) { delete staged; });
}

// TENSORTREE_SHM_INLINE_BYTES: the largest payload a node-local frame carries inside it (tests set
// 0 to take every transfer through the shared regions); unset keeps the default.
std::size_t inline_bytes_from_environment(std::size_t fallback) {
  const char* text = std::getenv("TENSORTREE_SHM_INLINE_BYTES");
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] < '0' || text[0] > '9' || value > (1ULL << 20)) {
    throw InvalidArgument(fmt::format("TENSORTREE_SHM_INLINE_BYTES must be a number of bytes up to 1 MiB, got '{}'",
                                      text));
  }
  return static_cast<std::size_t>(value);
}

NodeLocalOptions node_local_options(const GroupState& group) {
  NodeLocalOptions options{.timeout = group.options().timeout, .max_message_bytes = group.options().max_message_bytes};
  options.inline_bytes = inline_bytes_from_environment(options.inline_bytes);
  return options;
}

// `collectives` runs the group's collectives; `special` serves the peers `kinds` marks `kind`,
// `rest` the others. `any_source` takes receives from any member (see DeviceTransports).
DeviceTransports per_peer(const std::vector<PeerTransportKind>& kinds, PeerTransportKind kind,
                          std::shared_ptr<Collectives> collectives, const std::shared_ptr<PeerTransport>& special,
                          const std::shared_ptr<PeerTransport>& rest, std::shared_ptr<PeerTransport> any_source) {
  DeviceTransports transports{std::move(collectives), {}, std::move(any_source)};
  for (const PeerTransportKind each : kinds) transports.peers.push_back(each == kind ? special : rest);
  return transports;
}

std::vector<std::uint8_t> marked(const std::vector<PeerTransportKind>& kinds, PeerTransportKind kind) {
  std::vector<std::uint8_t> flags;
  for (const PeerTransportKind each : kinds) flags.push_back(each == kind ? 1 : 0);
  return flags;
}

// Every member decides alike, from the placements and probe results they all hold.
DeviceTransports host_transports(GroupState& group) {
  const std::shared_ptr<Engine> mpi = host_transport(group);
  const std::vector<PeerTransportKind> kinds = choose_host_transports(
      group.placements(), group.rank(), group.mappable(), group.options().host_transport);
  const std::vector<std::uint8_t> local = marked(kinds, PeerTransportKind::SharedMemory);
  if (std::count(local.begin(), local.end(), 1) == 0) return everyone(mpi, group.size());
  auto shared = std::make_shared<NodeLocalBackend>(std::make_shared<HostShareableMemory>(), mpi, local,
                                                   node_local_options(group));
  // The shared-memory transport's frames and MPI's plain messages travel on one communicator, so
  // its receive from any source matches both.
  return per_peer(kinds, PeerTransportKind::SharedMemory, mpi, shared, mpi, shared);
}

// Threads of one process share their GPUs: CUDA IPC cannot open a handle in the process that
// exported it, and NCCL refuses two ranks on one GPU, so an in-process group stages everything
// through pinned memory over its host backend.
DeviceTransports in_process_cuda_transports(GroupState& group) {
  if (group.options().cuda_transport == CudaTransport::Nccl) {
    throw NotSupported(fmt::format("CudaTransport::Nccl for an in-process group of {} ranks: its members are threads "
                                   "of one process, which stage CUDA tensors through host memory", group.size()));
  }
  return everyone(staged_transport(host_transport(group)), group.size());
}

DeviceTransports cuda_transports(GroupState& group, Device device) {
  if (is_in_process(group.bootstrap())) return in_process_cuda_transports(group);
  const CudaTransport preference = group.options().cuda_transport;
  const CudaTransportChoice choice = choose_cuda_transport(group.placements(), TT_HAVE_NCCL != 0, preference);
  const std::shared_ptr<Engine> host = host_transport(group);
  const std::shared_ptr<Engine> staged = staged_transport(host);
  const std::vector<PeerTransportKind> kinds =
      choose_cuda_transports(group.placements(), group.rank(), choice.kind, preference);
  if (choice.kind == CudaTransportKind::Nccl) {
    const std::shared_ptr<Engine> nccl = nccl_transport(group, device);
    return per_peer(kinds, PeerTransportKind::Nccl, nccl, nccl, staged, nccl);
  }
  const std::vector<std::uint8_t> local = marked(kinds, PeerTransportKind::CudaIpc);
  if (std::count(local.begin(), local.end(), 1) == 0) return everyone(staged, group.size());
  auto shared = std::make_shared<NodeLocalBackend>(std::make_shared<CudaShareableMemory>(device), host, local,
                                                   node_local_options(group));
  // Frames and the staged chunks of peers off the GPU share the host communicator, but a chunked
  // message is not one receive: the CUDA IPC transport takes receives from any source only where
  // every peer is on this GPU (NotSupported otherwise).
  return per_peer(kinds, PeerTransportKind::CudaIpc, staged, shared, staged, shared);
}

}  // namespace

DeviceTransports DefaultTransportFactory::create(GroupState& group, Device device) {
  if (device.is_cpu()) return host_transports(group);
  return cuda_transports(group, device);
}

}  // namespace tensortree::detail

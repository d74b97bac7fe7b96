#include "tensortree/backend.hpp"

#include <string>

#include "tensortree/error.hpp"

namespace tensortree {

void Backend::unsupported(std::string_view operation) const {
  throw NotSupported(std::string(name()) + " does not support " + std::string(operation));
}

WorkPtr Backend::broadcast(const Tensor&, int) { unsupported("broadcast"); }
WorkPtr Backend::all_reduce(const Tensor&, ReduceOp) { unsupported("all_reduce"); }
WorkPtr Backend::reduce(const Tensor&, int, ReduceOp) { unsupported("reduce"); }
WorkPtr Backend::all_gather(const Tensor&, const Tensor&) { unsupported("all_gather"); }
WorkPtr Backend::gather(const Tensor&, const Tensor&, int) { unsupported("gather"); }
WorkPtr Backend::scatter(const Tensor&, const Tensor&, int) { unsupported("scatter"); }
WorkPtr Backend::reduce_scatter(const Tensor&, const Tensor&, ReduceOp) { unsupported("reduce_scatter"); }
WorkPtr Backend::all_to_all(const Tensor&, const Tensor&, std::span<const std::int64_t>,
                            std::span<const std::int64_t>) {
  unsupported("all_to_all");
}
WorkPtr Backend::send(const Tensor&, int, int) { unsupported("send"); }
WorkPtr Backend::recv(const Tensor&, int, int) { unsupported("recv"); }
ReceivedMessage Backend::recv_message(int, int) { unsupported("recv_message"); }
WorkPtr Backend::recv_matched(int, int, ChooseDestination) { unsupported("recv_matched"); }
StoragePtr Backend::allocate_message_buffer(std::size_t nbytes, Device device) {
  return Storage::allocate(nbytes, device);
}
WorkPtr Backend::batch_p2p(std::span<const P2POp>) { unsupported("batch_p2p"); }
WorkPtr Backend::barrier() { unsupported("barrier"); }
void Backend::abort(const std::string&) {}

}  // namespace tensortree

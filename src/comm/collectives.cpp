#include "tensortree/collectives.hpp"

#include <string>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

[[noreturn]] void unsupported(const Collectives& engine, std::string_view operation) {
  throw NotSupported(fmt::format("{} does not support {}", engine.name(), operation));
}

}  // namespace

WorkPtr Collectives::broadcast(const Tensor&, int) { unsupported(*this, "broadcast"); }
WorkPtr Collectives::all_reduce(const Tensor&, ReduceOp) { unsupported(*this, "all_reduce"); }
WorkPtr Collectives::reduce(const Tensor&, int, ReduceOp) { unsupported(*this, "reduce"); }
WorkPtr Collectives::all_gather(const Tensor&, const Tensor&) { unsupported(*this, "all_gather"); }
WorkPtr Collectives::gather(const Tensor&, const Tensor&, int) { unsupported(*this, "gather"); }
WorkPtr Collectives::scatter(const Tensor&, const Tensor&, int) { unsupported(*this, "scatter"); }
WorkPtr Collectives::reduce_scatter(const Tensor&, const Tensor&, ReduceOp) { unsupported(*this, "reduce_scatter"); }
WorkPtr Collectives::all_to_all(const Tensor&, const Tensor&, std::span<const std::int64_t>,
                                std::span<const std::int64_t>) {
  unsupported(*this, "all_to_all");
}
WorkPtr Collectives::barrier() { unsupported(*this, "barrier"); }
void Collectives::abort(const std::string&) {}

}  // namespace tensortree

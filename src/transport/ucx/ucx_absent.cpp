// A library built without UCX: nodes cannot be made; what uses them reports why.
#include "transport/ucx/ucx_link.hpp"

#include "tensortree/error.hpp"

namespace tensortree::ucx {

namespace {

[[noreturn]] void absent() { throw NotSupported("tree channels need UCX: tensortree was built without it (-Ducx)"); }

}  // namespace

std::shared_ptr<Node> listening_node(const std::string&) { absent(); }
std::shared_ptr<Node> connecting_node() { absent(); }

}  // namespace tensortree::ucx

// Weights across nodes: broadcast_weights between ranks that are threads (the in-process world),
// each receiving rank then publishing what arrived to its own node-local publication.
#include <catch2/catch.hpp>

#include "../../comm/in_process_support.hpp"
#include "tensortree/weights.hpp"
#include "weights_test_support.hpp"

using namespace tensortree;
using namespace tensortree::test;
using namespace tensortree::weights_test;

TEST_CASE("broadcast_weights brings every rank the root's parameters and version, then relays them locally") {
  const int size = GENERATE(2, 3);
  const int root = size - 1;
  const std::string name = unique_name("relay");
  run_ranks(size, [&](const Group& group) {
    const int me = group.rank();
    TensorTree params = me == root ? make_params(70) : TensorTree();
    expect(broadcast_weights(group, root, params, 70) == 70, "first version");
    expect(params_mismatch(params, 70).empty(), "first parameters on rank " + std::to_string(me));
    // The second round lands in the leaves the first one made.
    const void* before = params.get("head.w").data_ptr();
    if (me == root) params = make_params(71);
    expect(broadcast_weights(group, root, params, 71) == 71, "second version");
    expect(params_mismatch(params, 71).empty(), "second parameters on rank " + std::to_string(me));
    if (me != root) expect(params.get("head.w").data_ptr() == before, "received in place");
    if (me == 0 && me != root) {
      WeightPublisher local(name + "-" + std::to_string(me));
      local.publish(params, 71);
      const WeightLease lease = WeightSubscriber(local.path()).latest();
      expect(lease.version() == 71 && params_mismatch(lease.tree(), 71).empty(), "relayed on rank 0");
    }
  });
}

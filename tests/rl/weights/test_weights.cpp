// Weight publication in one process: versions read zero-copy and copied out, leases pinning their
// slots, publish waiting (bounded) when readers hold every slot, layouts and versions refused, one
// publisher per name, a reopened publication continuing its versions.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "tensortree/error.hpp"
#include "tensortree/weights.hpp"
#include "weights_test_support.hpp"

using namespace tensortree;
using namespace tensortree::weights_test;
using Catch::Matchers::Contains;

TEST_CASE("a subscriber reads every published version as views of the shared slot, every element checked") {
  const std::string name = unique_name("views");
  WeightPublisher publisher(name);
  REQUIRE(publisher.version() == 0);
  REQUIRE(publisher.publish(make_params(1)) == 1);
  WeightSubscriber subscriber(name);
  for (std::uint64_t v = 2; v <= 12; ++v) {
    REQUIRE(publisher.publish(make_params(v)) == v);
    REQUIRE(subscriber.latest_version() == v);
    const WeightLease lease = subscriber.latest();
    REQUIRE(lease.held());
    REQUIRE(lease.version() == v);
    REQUIRE(lease.intact());
    REQUIRE(lease.tree().is_consolidated());
    REQUIRE(params_mismatch(lease.tree(), v).empty());
    // Zero-copy: a second lease of the same version views the same bytes.
    const WeightLease again = subscriber.latest();
    REQUIRE(again.tree().get("encoder.w").data_ptr() == lease.tree().get("encoder.w").data_ptr());
  }
}

TEST_CASE("copy_into and latest_copy copy the newest version out, into any leaves of the layout") {
  const std::string name = unique_name("copies");
  WeightPublisher publisher(name);
  publisher.publish(make_params(5), 40);
  WeightSubscriber subscriber(name);
  publisher.publish(make_params(41));

  const TensorTree mine = make_params(0);
  REQUIRE(subscriber.copy_into(mine) == 41);
  REQUIRE(params_mismatch(mine, 41).empty());

  auto [version, copy] = subscriber.latest_copy();
  REQUIRE(version == 41);
  REQUIRE(copy.is_consolidated());
  REQUIRE(params_mismatch(copy, 41).empty());
  // Its own memory: a later publish leaves it as it was.
  publisher.publish(make_params(42));
  publisher.publish(make_params(43));
  REQUIRE(params_mismatch(copy, 41).empty());

  TensorTree other = make_params(0);
  other.set("head.extra", Tensor::zeros({2}));
  REQUIRE_THROWS_AS(subscriber.copy_into(other), SchemaMismatch);
  // The message names the key, not two fingerprints.
  REQUIRE_THROWS_WITH(subscriber.copy_into(other), Catch::Contains("at key 'head.extra'"));
}

TEST_CASE("a lease pins its slot: later versions go to the other slots, and the held one stays whole") {
  const std::string name = unique_name("pin");
  WeightPublisher publisher(name, {.slots = 4});
  publisher.publish(make_params(1));
  WeightSubscriber subscriber(name);
  WeightLease held = subscriber.latest();
  const void* held_bytes = held.tree().storage()->data();
  for (std::uint64_t v = 2; v <= 30; ++v) {
    publisher.publish(make_params(v));
    const WeightLease newest = subscriber.latest();
    REQUIRE(newest.version() == v);
    REQUIRE(newest.tree().storage()->data() != held_bytes);
    REQUIRE(params_mismatch(newest.tree(), v).empty());
  }
  REQUIRE(held.version() == 1);
  REQUIRE(held.intact());
  REQUIRE(params_mismatch(held.tree(), 1).empty());
  held.release();
  REQUIRE_FALSE(held.held());
  REQUIRE_THROWS_AS(held.tree(), InvalidArgument);
}

TEST_CASE("publish waits while live readers hold every slot but the newest, then times out naming them") {
  const std::string name = unique_name("full");
  WeightPublisher publisher(name, {.slots = 3, .timeout = std::chrono::milliseconds(200)});
  publisher.publish(make_params(1));
  WeightSubscriber subscriber(name);
  WeightLease first = subscriber.latest();
  publisher.publish(make_params(2));
  WeightLease second = subscriber.latest();
  publisher.publish(make_params(3));  // the third slot
  REQUIRE_THROWS_MATCHES(publisher.publish(make_params(4)), Timeout,
                         Catch::Matchers::Predicate<Timeout>([](const Timeout& e) {
                           const std::string what = e.what();
                           return what.find("live readers") != std::string::npos &&
                                  what.find("pid " + std::to_string(::getpid())) != std::string::npos;
                         }));
  REQUIRE(publisher.version() == 3);
  REQUIRE(params_mismatch(first.tree(), 1).empty());
  REQUIRE(params_mismatch(second.tree(), 2).empty());
  first.release();
  REQUIRE(publisher.publish(make_params(4)) == 4);
  REQUIRE(params_mismatch(subscriber.latest().tree(), 4).empty());
  REQUIRE(params_mismatch(second.tree(), 2).empty());
}

TEST_CASE("a lease outlives its subscriber and moves without releasing twice") {
  const std::string name = unique_name("outlive");
  WeightPublisher publisher(name, {.slots = 3, .timeout = std::chrono::milliseconds(100)});
  publisher.publish(make_params(7), 7);
  WeightLease lease;
  {
    WeightSubscriber subscriber(name);
    WeightLease taken = subscriber.latest();
    lease = std::move(taken);
    REQUIRE_FALSE(taken.held());
  }
  for (std::uint64_t v = 8; v <= 20; ++v) REQUIRE(publisher.publish(make_params(v)) == v);
  REQUIRE(lease.version() == 7);
  REQUIRE(lease.intact());
  REQUIRE(params_mismatch(lease.tree(), 7).empty());
  lease = WeightLease();
  REQUIRE_FALSE(lease.held());
  REQUIRE(publisher.publish(make_params(21)) == 21);
}

TEST_CASE("publish refuses a tree of another layout, naming the difference") {
  const std::string name = unique_name("layout");
  WeightPublisher publisher(name);
  publisher.publish(make_params(1));

  std::vector<ParamDef> wider = param_defs();
  wider[1].shape = {130};
  REQUIRE_THROWS_MATCHES(publisher.publish(make_params(2, wider)), SchemaMismatch,
                         Catch::Matchers::Predicate<SchemaMismatch>([](const SchemaMismatch& e) {
                           return std::string(e.what()).find(
                                      "at key 'encoder.b': float32 [129] in the publication, float32 [130] here") !=
                                  std::string::npos;
                         }));
  std::vector<ParamDef> retyped = param_defs();
  retyped[4].dtype = DType::Int64;
  REQUIRE_THROWS_WITH(publisher.publish(make_params(2, retyped)),
                      Contains("at key 'norm.scale': int32 [301] in the publication, int64 [301] here"));
  std::vector<ParamDef> fewer(param_defs().begin(), param_defs().end() - 1);
  REQUIRE_THROWS_WITH(publisher.publish(make_params(2, fewer)),
                      Contains("at key 'norm.count': int16 [5, 3] in the publication, no such key here"));
  std::vector<ParamDef> more = param_defs();
  more.push_back({"extra", DType::Float32, {3}});
  REQUIRE_THROWS_WITH(publisher.publish(make_params(2, more)),
                      Contains("at key 'extra': no such key in the publication, float32 [3] here"));

  REQUIRE(publisher.version() == 1);
  REQUIRE(params_mismatch(WeightSubscriber(name).latest().tree(), 1).empty());
}

TEST_CASE("versions must grow, and options are bounded") {
  const std::string name = unique_name("versions");
  WeightPublisher publisher(name);
  REQUIRE(publisher.publish(make_params(9), 9) == 9);
  REQUIRE_THROWS_AS(publisher.publish(make_params(9), 9), InvalidArgument);
  REQUIRE_THROWS_AS(publisher.publish(make_params(8), 8), InvalidArgument);
  REQUIRE(publisher.publish(make_params(10)) == 10);
  REQUIRE_THROWS_AS(WeightPublisher(unique_name("opt"), {.slots = 2}), InvalidArgument);
  REQUIRE_THROWS_AS(WeightPublisher(unique_name("opt"), {.slots = 17}), InvalidArgument);
  REQUIRE_THROWS_AS(WeightPublisher(unique_name("opt"), {.max_leases = 0}), InvalidArgument);
  REQUIRE_THROWS_AS(WeightPublisher(""), InvalidArgument);
}

TEST_CASE("one publisher per name; a reopened publication continues its versions and keeps its layout") {
  const std::string name = unique_name("reopen");
  {
    WeightPublisher first(name, {.unlink_on_close = false});
    first.publish(make_params(3), 3);
    REQUIRE_THROWS_WITH(WeightPublisher(name), Contains("already has a live publisher"));
  }
  WeightPublisher again(name);
  REQUIRE(again.version() == 3);
  WeightSubscriber subscriber(name);
  REQUIRE(params_mismatch(subscriber.latest().tree(), 3).empty());
  REQUIRE(again.publish(make_params(4)) == 4);
  REQUIRE(params_mismatch(subscriber.latest().tree(), 4).empty());
  std::vector<ParamDef> other = param_defs();
  other[0].shape = {2, 2};
  REQUIRE_THROWS_AS(again.publish(make_params(5, other)), SchemaMismatch);
}

TEST_CASE("replace starts a publication of a new layout over an old one") {
  const std::string name = unique_name("replace");
  std::vector<ParamDef> other = param_defs();
  other[0].shape = {2, 2};
  {
    WeightPublisher old(name, {.unlink_on_close = false});
    old.publish(make_params(6));
  }
  WeightPublisher replacing(name, {.replace = true});
  REQUIRE(replacing.version() == 0);
  REQUIRE(replacing.publish(make_params(1, other)) == 1);
  const WeightLease lease = WeightSubscriber(name).latest();
  REQUIRE(lease.version() == 1);
  REQUIRE(params_mismatch(lease.tree(), 1, other).empty());
}

TEST_CASE("a publication in a directory, and a subscriber that waits for it at most its timeout") {
  char dir_template[] = "/tmp/tt_weights_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string path = std::string(dir_template) + "/policy";
  REQUIRE_THROWS_WITH(WeightSubscriber(path, {.timeout = std::chrono::milliseconds(50)}), Contains("did not appear"));
  {
    WeightPublisher publisher(path);
    publisher.publish(make_params(2));
    REQUIRE(params_mismatch(WeightSubscriber(path).latest().tree(), 2).empty());
  }
  REQUIRE(::access(path.c_str(), F_OK) != 0);  // removed with its publisher
  REQUIRE(::rmdir(dir_template) == 0);
}

TEST_CASE("latest() waits while live readers hold every lease word, then times out naming them") {
  const std::string name = unique_name("words");
  WeightPublisher publisher(name, {.max_leases = 2});
  publisher.publish(make_params(1));
  const WeightSubscriber subscriber(name, {.timeout = std::chrono::milliseconds(100)});
  WeightLease a = subscriber.latest();
  const WeightLease b = subscriber.latest();
  REQUIRE_THROWS_MATCHES(subscriber.latest(), Timeout, Catch::Matchers::Predicate<Timeout>([](const Timeout& e) {
                           return std::string(e.what()).find("no version could be leased") != std::string::npos;
                         }));
  a.release();
  const WeightLease c = subscriber.latest();
  REQUIRE(params_mismatch(c.tree(), 1).empty());
}

TEST_CASE("threads of one subscriber lease versions at once while the publisher writes") {
  const std::string name = unique_name("threads");
  constexpr std::uint64_t kLast = 150;
  WeightPublisher publisher(name, {.slots = 3});
  publisher.publish(make_params(1));
  const WeightSubscriber subscriber(name);
  std::mutex failure_lock;
  std::string failure;
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      std::uint64_t last = 0;
      while (last < kLast) {
        const WeightLease lease = subscriber.latest();
        std::string why = lease.version() < last ? "an older version came back" : params_mismatch(lease.tree(), lease.version());
        if (!why.empty()) {
          const std::lock_guard guard(failure_lock);
          failure = why;
          return;
        }
        last = lease.version();
      }
    });
  }
  for (std::uint64_t v = 2; v <= kLast; ++v) publisher.publish(make_params(v));
  for (std::thread& reader : readers) reader.join();
  REQUIRE(failure.empty());
}

TEST_CASE("of two publishers made before either published, the second to publish is refused") {
  const std::string name = unique_name("race");
  WeightPublisher first(name);
  WeightPublisher second(name);
  first.publish(make_params(1));
  REQUIRE_THROWS_WITH(second.publish(make_params(2)), Contains("another publisher owns the name"));
  const WeightLease lease = WeightSubscriber(name).latest();
  REQUIRE(lease.version() == 1);
  REQUIRE(params_mismatch(lease.tree(), 1).empty());
}

TEST_CASE("publish gathers strided leaves straight into the slot") {
  const std::string name = unique_name("strided");
  TensorTree params = make_params(3);
  const Tensor dense = params.get("encoder.w");
  const Tensor strided = dense.transpose(0, 1).contiguous().transpose(0, 1);
  REQUIRE_FALSE(strided.is_contiguous());
  params.set("encoder.w", strided);
  WeightPublisher publisher(name);
  publisher.publish(params);
  REQUIRE(params_mismatch(WeightSubscriber(name).latest().tree(), 3).empty());
}

TEST_CASE("CUDA slots without a usable device fail typed and leave no file behind") {
  if (cuda_device_count() > 0) return;  // tests/rl/weights/test_weights_cuda.cpp covers the device
  const std::string name = unique_name("nodevice");
  WeightPublisher publisher(name, {.device = Device::cuda(0)});
  REQUIRE_THROWS_AS(publisher.publish(make_params(1)), NotSupported);
  REQUIRE(::access(WeightPublisher::shared_memory_path(name).c_str(), F_OK) != 0);
  REQUIRE_THROWS_AS(WeightSubscriber(name, {.timeout = std::chrono::milliseconds(20)}), Timeout);
}

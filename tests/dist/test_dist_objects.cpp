// Object collectives: nested std containers and a user struct move intact; damaged bytes are
// CorruptData; a root's bad argument fails every rank.
#include <catch2/catch.hpp>

#include <boost/serialization/map.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ops_test_support.hpp"
#include "tensortree/dist_objects.hpp"

using namespace tensortree;
using namespace tensortree::test;

namespace {

using Inventory = std::map<std::string, std::vector<int>>;

// A user type with nested containers, serialized through its own serialize() member.
struct Trajectory {
  int actor = 0;
  std::string policy;
  std::vector<std::pair<std::string, double>> rewards;
  Inventory counters;

  template <class Archive>
  void serialize(Archive& archive, const unsigned /*version*/) {
    archive & actor & policy & rewards & counters;
  }
  bool operator==(const Trajectory&) const = default;
};

Inventory inventory_of(int rank) {
  Inventory inventory;
  for (int k = 0; k <= rank; ++k) {
    std::vector<int> values;
    for (int i = 0; i <= k; ++i) values.push_back(1000 * (rank + 1) + 10 * k + i + 1);
    inventory["key-" + std::to_string(k)] = values;
  }
  return inventory;
}

Trajectory trajectory_of(int rank) {
  Trajectory trajectory{rank + 1, "policy-of-rank-" + std::to_string(rank), {}, inventory_of(rank)};
  for (int step = 0; step < rank + 2; ++step) {
    trajectory.rewards.emplace_back("step-" + std::to_string(step), 0.5 * (rank + 1) + step);
  }
  return trajectory;
}

dist::detail::Bytes flipped(dist::detail::Bytes bytes, std::size_t index) {
  bytes.at(index) ^= std::byte{0x5a};
  return bytes;
}

}  // namespace

TEST_CASE("objects: broadcast_object copies the last rank's map of vectors to every rank", "[ops]") {
  for_each_group([](const Group& group) {
    const int root = last_rank(group);
    Inventory inventory = inventory_of(group.rank());
    dist::broadcast_object(inventory, root, group);
    CHECK(inventory == inventory_of(root));
  });
}

TEST_CASE("objects: all_gather_object returns every rank's user struct in rank order", "[ops]") {
  for_each_group([](const Group& group) {
    check_one_per_rank<Trajectory>(dist::all_gather_object(trajectory_of(group.rank()), group), group,
                                   [](const Trajectory& from, int rank) { CHECK(from == trajectory_of(rank)); });
  });
}

TEST_CASE("objects: gather_object gives the last rank every rank's pair and the others nothing", "[ops]") {
  for_each_group([](const Group& group) {
    using Tagged = std::pair<std::string, std::vector<int>>;
    const int root = last_rank(group);
    const Tagged mine{"rank-" + std::to_string(group.rank()), inventory_of(group.rank()).at("key-0")};
    check_gathered<Tagged>(dist::gather_object(mine, root, group), group, root, [](const Tagged& from, int rank) {
      CHECK(from == Tagged{"rank-" + std::to_string(rank), inventory_of(rank).at("key-0")});
    });
  });
}

TEST_CASE("objects: scatter_object gives each rank the string the last rank meant for it", "[ops]") {
  for_each_group([](const Group& group) {
    const int root = last_rank(group);
    std::vector<std::string> values;
    if (group.rank() == root) {
      // Lengths differ per rank, an empty string included.
      for (int r = 0; r < group.size(); ++r) values.push_back(std::string(static_cast<std::size_t>(r) * 7, 'a' + r));
    }
    const std::string mine = dist::scatter_object<std::string>(values, root, group);
    CHECK(mine == std::string(static_cast<std::size_t>(group.rank()) * 7, static_cast<char>('a' + group.rank())));
  });
}

TEST_CASE("objects: send_object and recv_object pass a user struct around a ring, from any source too", "[ops]") {
  for_each_group([](const Group& group) {
    const int n = group.size();
    const int me = group.rank();
    const int left = (me + n - 1) % n;
    if (n == 1) return;  // a blocking send to oneself has no receiver posted yet
    if (me % 2 == 0) {
      dist::send_object(trajectory_of(me), (me + 1) % n, group, {.tag = 3});
      CHECK(dist::recv_object<Trajectory>(left, group, {.tag = 3}) == trajectory_of(left));
    } else {
      CHECK(dist::recv_object<Trajectory>(kAnySource, group, {.tag = 3}) == trajectory_of(left));
      dist::send_object(trajectory_of(me), (me + 1) % n, group, {.tag = 3});
    }
  });
}

TEST_CASE("objects: damaged object bytes are CorruptData naming what is wrong", "[ops]") {
  const dist::detail::Bytes sealed = dist::detail::to_bytes(inventory_of(2));
  const auto corrupt = [](const dist::detail::Bytes& bytes) {
    return error_of<CorruptData>([&] { dist::detail::from_bytes<Inventory>(bytes); });
  };
  CHECK(dist::detail::from_bytes<Inventory>(sealed) == inventory_of(2));
  CHECK_THAT(corrupt(flipped(sealed, sealed.size() - 1)), Catch::Contains("checksum"));
  CHECK_THAT(corrupt(flipped(sealed, 0)), Catch::Contains("magic"));
  CHECK_THAT(corrupt(dist::detail::Bytes(sealed.begin(), sealed.begin() + 10)), Catch::Contains("shorter"));
  CHECK_THAT(corrupt(dist::detail::Bytes(sealed.begin(), sealed.end() - 3)), Catch::Contains("payload bytes"));
  CHECK_THAT(corrupt(dist::detail::to_bytes(7)), Catch::Contains("do not decode"));
  // A sealed payload is still untrusted: its header must be exactly what our senders write (the
  // next case checks the lengths it claims).
  CHECK_THAT(corrupt(dist::detail::seal("not a boost archive at all")), Catch::Contains("Boost archive header"));
}

TEST_CASE("objects: a sealed vector claiming more elements than its bytes hold is CorruptData", "[ops]") {
  std::string payload = dist::detail::unseal(dist::detail::to_bytes(std::vector<int>{11, 12, 13}));
  const std::string count_of_three("\x03\0\0\0\0\0\0\0", 8);
  const std::size_t at = payload.rfind(count_of_three);
  REQUIRE(at != std::string::npos);
  payload.replace(at, count_of_three.size(), std::string("\xff\xff\xff\xff\xff\xff\xff\x0f", 8));
  CHECK_THAT(error_of<CorruptData>([&] { dist::detail::from_bytes<std::vector<int>>(dist::detail::seal(payload)); }),
             Catch::Contains("elements but only"));
}

TEST_CASE("objects: a peer's damaged object stream is CorruptData on the receiving rank", "[ops]") {
  const Group& world = context().world();
  const int sender = last_rank(world);
  if (world.rank() == sender) {
    const dist::detail::Bytes sealed = dist::detail::to_bytes(trajectory_of(sender));
    dist::detail::send_bytes(flipped(sealed, sealed.size() / 2), 0, world, 4);
  } else if (world.rank() == 0) {
    CHECK_THAT(error_of<CorruptData>([&] { dist::recv_object<Trajectory>(sender, world, {.tag = 4}); }),
               Catch::Contains("checksum"));
  }
  dist::barrier(world);
}

TEST_CASE("objects: object collectives reject bad arguments on every rank before anything is sent", "[ops]") {
  const Group& world = context().world();
  const int n = world.size();
  Inventory inventory = inventory_of(world.rank());
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::broadcast_object(inventory, n, world); }), Catch::Contains("src"));
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::gather_object(inventory, -1, world); }), Catch::Contains("dst"));
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::send_object(inventory, n, world); }), Catch::Contains("dst"));
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::recv_object<Inventory>(0, world, {.tag = -2}); }), Catch::Contains("tag"));

  // Only the root holds the list, so only it can be wrong; the size round tells everyone.
  const int root = last_rank(world);
  std::vector<int> values;
  if (world.rank() == root) values.assign(static_cast<std::size_t>(n + 1), 7);
  CHECK_THAT(error_of<InvalidArgument>([&] { dist::scatter_object<int>(values, root, world); }),
             Catch::Contains("one per rank"));

  dist::broadcast_object(inventory, root, world);
  CHECK(inventory == inventory_of(root));
}

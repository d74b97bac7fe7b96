// Control blocks nobody should trust: truncated, of another format version, with sizes or offsets
// that do not add up, a layout that does not decode, a newest-version word naming no slot. Each is a
// typed error naming what was wrong, never a crash.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "rl/weights/control_block.hpp"
#include "rl/weights/lease_table.hpp"
#include "tensortree/error.hpp"
#include "tensortree/weights.hpp"
#include "weights_test_support.hpp"

using namespace tensortree;
using namespace tensortree::weights_test;
using Catch::Matchers::Contains;
using rl::FixedHeader;

namespace {

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
void poke(std::vector<char>& bytes, std::size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

// A valid publication's bytes (left in place by its publisher), and a path to write variants to.
struct Specimen {
  std::string name = unique_name("hostile");
  std::string path = WeightPublisher::shared_memory_path(name).string();
  std::vector<char> bytes;
  Specimen() {
    WeightPublisher publisher(name, {.slots = 3, .max_leases = 8, .unlink_on_close = false});
    publisher.publish(make_params(1));
    bytes = file_bytes(path);
  }
  ~Specimen() { ::unlink(path.c_str()); }
  // Opens `variant` as a subscriber would.
  void open(const std::vector<char>& variant) const {
    write_file(path, variant);
    WeightSubscriber subscriber(name, {.timeout = std::chrono::milliseconds(100)});
    (void)subscriber.latest();
  }
};

}  // namespace

TEST_CASE("the specimen itself opens: the variants below fail for what they change alone") {
  const Specimen specimen;
  REQUIRE_NOTHROW(specimen.open(specimen.bytes));
  REQUIRE(params_mismatch(WeightSubscriber(specimen.name).latest().tree(), 1).empty());
}

TEST_CASE("a truncated publication is CorruptData naming the truncation") {
  const Specimen specimen;
  std::vector<char> bytes = specimen.bytes;
  bytes.resize(100);
  REQUIRE_THROWS_MATCHES(specimen.open(bytes), CorruptData,
                         Catch::Matchers::Predicate<CorruptData>([](const CorruptData& e) {
                           return std::string(e.what()).find("truncated") != std::string::npos;
                         }));
  bytes = specimen.bytes;
  bytes.resize(bytes.size() - 4096);
  REQUIRE_THROWS_WITH(specimen.open(bytes), Contains("truncated"));
}

TEST_CASE("a publication of another format version or magic is CorruptData naming it") {
  const Specimen specimen;
  std::vector<char> bytes = specimen.bytes;
  poke<std::uint32_t>(bytes, offsetof(FixedHeader, format_version), 7);
  REQUIRE_THROWS_WITH(specimen.open(bytes), Contains("format version 7; this build reads version 1"));
  bytes = specimen.bytes;
  poke<std::uint64_t>(bytes, offsetof(FixedHeader, magic), 0x1234);
  REQUIRE_THROWS_WITH(specimen.open(bytes), Contains("bad magic"));
}

TEST_CASE("sizes and offsets that break their bounds are CorruptData naming the field") {
  const Specimen specimen;
  const auto refused = [&](std::size_t offset, auto value, const std::string& field) {
    std::vector<char> bytes = specimen.bytes;
    poke(bytes, offset, value);
    INFO(field);
    REQUIRE_THROWS_MATCHES(specimen.open(bytes), CorruptData,
                           Catch::Matchers::Predicate<CorruptData>([&](const CorruptData& e) {
                             return std::string(e.what()).find(field) != std::string::npos;
                           }));
  };
  refused(offsetof(FixedHeader, slot_count), std::uint32_t{1000}, "slot_count is 1000");
  refused(offsetof(FixedHeader, slot_count), std::uint32_t{2}, "slot_count is 2");
  refused(offsetof(FixedHeader, max_leases), std::uint32_t{0}, "max_leases is 0");
  refused(offsetof(FixedHeader, memory), std::uint32_t{9}, "memory kind is 9");
  refused(offsetof(FixedHeader, header_bytes), std::uint32_t{64}, "header_bytes is 64");
  refused(offsetof(FixedHeader, schema_bytes), std::uint64_t{1} << 40, "schema_bytes");
  refused(offsetof(FixedHeader, slot_stride), std::uint64_t{1} << 62, "slot_stride");
  refused(offsetof(FixedHeader, payload_bytes), ~std::uint64_t{0}, "slot_stride");
  refused(offsetof(FixedHeader, data_offset), std::uint64_t{4096}, "offsets");
  refused(offsetof(FixedHeader, file_bytes), std::uint64_t{1} << 50, "offsets");
  refused(offsetof(FixedHeader, fingerprint), std::uint64_t{42}, "fingerprint");
}

TEST_CASE("a layout that does not decode is CorruptData naming the publication") {
  const Specimen specimen;
  FixedHeader header{};
  std::memcpy(&header, specimen.bytes.data(), sizeof header);
  std::vector<char> bytes = specimen.bytes;
  bytes[header.schema_offset + header.schema_bytes - 1] ^= 0x5a;
  REQUIRE_THROWS_WITH(specimen.open(bytes), Contains("its layout does not decode"));
}

TEST_CASE("a newest-version word that names no slot is CorruptData from latest()") {
  const Specimen specimen;
  std::vector<char> bytes = specimen.bytes;
  poke<std::uint64_t>(bytes, offsetof(rl::ControlHeader, latest), rl::encode_latest(5, 99));
  REQUIRE_THROWS_WITH(specimen.open(bytes), Contains("slot 99 of 3"));
  poke<std::uint64_t>(bytes, offsetof(rl::ControlHeader, latest), 0);
  REQUIRE_THROWS_WITH(specimen.open(bytes), Contains("newest version is 0"));
}

TEST_CASE("a publisher refuses to reopen a hostile publication too") {
  const Specimen specimen;
  std::vector<char> bytes = specimen.bytes;
  poke<std::uint32_t>(bytes, offsetof(FixedHeader, format_version), 2);
  write_file(specimen.path, bytes);
  REQUIRE_THROWS_WITH(WeightPublisher(specimen.name), Contains("format version 2"));
}

namespace {

// A process that lives until killed, and its identity as its own lease words name it.
struct Sleeper {
  pid_t pid = -1;
  rl::ProcessIdentity identity;
  Sleeper() {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const rl::ProcessIdentity me = rl::this_process();
      if (::write(fds[1], &me, sizeof me) != static_cast<ssize_t>(sizeof me)) ::_exit(1);
      ::sleep(60);
      ::_exit(0);
    }
    ::close(fds[1]);
    REQUIRE(::read(fds[0], &identity, sizeof identity) == static_cast<ssize_t>(sizeof identity));
    ::close(fds[0]);
  }
  ~Sleeper() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

}  // namespace

TEST_CASE("a lease word whose pid now names another process is reclaimed, garbage ignored; a live holder's blocks") {
  const std::string name = unique_name("reuse");
  WeightPublisher publisher(name, {.slots = 3, .max_leases = 4, .timeout = std::chrono::milliseconds(200)});
  publisher.publish(make_params(1));  // slot 0; slots 1 and 2 are the candidates
  const int fd = ::open(WeightPublisher::shared_memory_path(name).c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  void* control = ::mmap(nullptr, rl::kHeaderRegion + 4 * rl::kLeaseStride, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(control != MAP_FAILED);
  auto* words = reinterpret_cast<rl::PaddedWord*>(static_cast<std::byte*>(control) + rl::kHeaderRegion);
  const Sleeper holder;
  REQUIRE(holder.identity.start != 0);

  // The pid is alive, but it started at another time than the lease says: a reused pid.
  const rl::ProcessIdentity reused{holder.identity.pid, holder.identity.start + 1};
  words[0].value = rl::encode_lease(reused, 1);
  words[1].value = rl::encode_lease(reused, 2);
  // Garbage besides: a slot that does not exist, and pid 0 (no process) on a real one.
  words[2].value = rl::encode_lease(holder.identity, 200);
  words[3].value = rl::encode_lease({0, 0}, 2);
  REQUIRE(publisher.publish(make_params(2)) == 2);
  REQUIRE(params_mismatch(WeightSubscriber(name).latest().tree(), 2).empty());

  // The same words from the live holder pin both slots that are not the newest.
  REQUIRE(words[0].value.load() + words[1].value.load() != 0);  // only the slot written was reclaimed
  const std::uint32_t newest = rl::decode_latest(static_cast<rl::ControlHeader*>(control)->latest.value.load()).slot;
  REQUIRE((newest == 1 || newest == 2));
  words[0].value = rl::encode_lease(holder.identity, 0);
  words[1].value = rl::encode_lease(holder.identity, 3 - newest);
  REQUIRE_THROWS_WITH(publisher.publish(make_params(3)), Contains("pid " + std::to_string(holder.pid)));
  REQUIRE(params_mismatch(WeightSubscriber(name).latest().tree(), 2).empty());
  ::munmap(control, rl::kHeaderRegion + 4 * rl::kLeaseStride);
  ::close(fd);
}

// The replay buffer's control block: one file (replay.control) beside the rows, mapped shared by
// every process that opens the buffer. It holds what the processes coordinate through: the insert
// cursor, a sequence number and an owner tag per row (a seqlock per row), the layout's state and
// fingerprint, and the priorities' sum and min trees.
//
// The file is untrusted input like any other: open() checks the whole header page before anything
// else is read: the fields fixed at creation under their checksum (magic, format version, sizes
// bounded and overflow-checked against the file's length), the shared fields processes change
// afterwards (cursors, counts, lock words, the largest priority) against their bounds, and every
// other byte of the page zero. The shared fields are checked again where they are used.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "memmap/memmap_fs.hpp"
#include "tensortree/replay_buffer.hpp"

namespace tensortree::detail {

inline constexpr std::string_view kControlFileName = "replay.control";
inline constexpr std::uint64_t kControlMagic = 0x59414c5045525454;  // "TTREPLAY" as a little-endian u64
// 2: lock words and row owners name a process by pid and start time (rl/process_identity.hpp).
inline constexpr std::uint32_t kControlVersion = 2;
// 2^36 rows: far more than any buffer holds, small enough that every size below fits in 64 bits.
inline constexpr std::int64_t kMaxCapacity = std::int64_t{1} << 36;
inline constexpr std::uint64_t kControlHeaderBytes = 4096;
// Tickets (the insert cursor) and the sample count stay below 2^62: every sequence number 2t+2
// fits in 64 bits and a cursor plus any extend cannot wrap. (At 10^9 rows a second: 146 years.)
inline constexpr std::uint64_t kMaxTickets = std::uint64_t{1} << 62;

enum class LayoutState : std::uint32_t { None = 0, Ready = 2 };

// The first page of the file. Fields up to `checksum` are written once at creation.
struct ControlHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t header_bytes;
  std::uint64_t capacity;
  std::uint64_t tree_leaves;  // sum tree width (a power of two >= capacity), 0 without priorities
  double alpha;
  double eps;
  std::uint64_t file_bytes;
  double samples_per_insert;  // the rate limiter (RateLimiterOptions)
  double min_diff;
  double max_diff;
  std::uint64_t min_size_to_sample;
  std::uint64_t checksum;  // XXH3-64 of the fields above
  // Shared state, each on its own cache line where processes hammer it.
  alignas(64) std::uint64_t cursor;        // tickets handed out; row = ticket % capacity
  alignas(64) std::uint64_t samples;       // rows returned by sample(), for the rate limiter
  alignas(64) std::uint64_t fifo_cursor;   // the next ticket the Fifo sampler hands out
  alignas(64) std::uint64_t layout_fingerprint;
  std::uint32_t layout_state;               // LayoutState
  std::uint32_t reserved;                   // zero
  std::uint64_t layout_lock;                // identity word of the process laying out the rows, 0 when none
  alignas(64) std::uint64_t priority_lock;  // identity word of the holder of the priority trees, 0 when free
  double max_priority;                     // largest priority given so far (raw, before alpha)
};
static_assert(sizeof(ControlHeader) <= kControlHeaderBytes);

// Where each array sits in the file, from the capacity alone.
struct ControlGeometry {
  std::uint64_t seq_offset = 0;    // u64 per row: 0 never written, 2t+1 ticket t being written, 2t+2 published
  std::uint64_t owner_offset = 0;  // two u64 per row: the writer's identity word, then its ticket + 1
  std::uint64_t sum_offset = 0;    // 2 * tree_leaves doubles, node 1 the root
  std::uint64_t min_offset = 0;    // the same, 0 standing for "no row"
  std::uint64_t file_bytes = 0;
};
// std::nullopt when the sizes overflow.
std::optional<ControlGeometry> control_geometry(std::uint64_t capacity, std::uint64_t tree_leaves);

class ControlBlock {
 public:
  // Creates `dir`/replay.control atomically (written aside, then linked into place): InvalidArgument
  // when one exists already.
  static ControlBlock create(const std::filesystem::path& dir, const ReplayBufferOptions& options);
  static ControlBlock open(const std::filesystem::path& dir);

  ControlHeader& header() const { return *static_cast<ControlHeader*>(mapping_.data()); }
  // From the header as validated when opened: the mapped copy may change under us, these do not.
  std::int64_t capacity() const { return capacity_; }
  std::uint64_t tree_leaves() const { return tree_leaves_; }
  double alpha() const { return alpha_; }
  double eps() const { return eps_; }
  std::atomic_ref<std::uint64_t> cursor() const { return std::atomic_ref(header().cursor); }
  std::atomic_ref<std::uint64_t> samples() const { return std::atomic_ref(header().samples); }
  std::atomic_ref<std::uint64_t> fifo_cursor() const { return std::atomic_ref(header().fifo_cursor); }
  const RateLimiterOptions& limits() const { return limits_; }
  std::atomic_ref<std::uint64_t> seq(std::int64_t row) const { return std::atomic_ref(seq_[row]); }
  // Who claimed the row last (rl::identity_word), and for which ticket (+ 1; 0 for none): the
  // identity is stored first, so a reader that sees the ticket sees the identity that goes with it.
  std::atomic_ref<std::uint64_t> owner(std::int64_t row) const { return std::atomic_ref(owner_[2 * row]); }
  std::atomic_ref<std::uint64_t> owner_ticket(std::int64_t row) const { return std::atomic_ref(owner_[2 * row + 1]); }
  double* sum_tree() const { return sum_; }
  double* min_tree() const { return min_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  ControlBlock(Mapping mapping, std::filesystem::path file, const ControlHeader& fixed);

  Mapping mapping_;
  std::filesystem::path file_;
  std::uint64_t* seq_ = nullptr;
  std::uint64_t* owner_ = nullptr;
  double* sum_ = nullptr;
  double* min_ = nullptr;
  std::int64_t capacity_ = 0;
  std::uint64_t tree_leaves_ = 0;
  double alpha_ = 1;
  double eps_ = 0;
  RateLimiterOptions limits_;
};

// Sequence numbers of ticket t.
constexpr std::uint64_t writing_seq(std::uint64_t ticket) { return 2 * ticket + 1; }
constexpr std::uint64_t published_seq(std::uint64_t ticket) { return 2 * ticket + 2; }
constexpr bool is_published(std::uint64_t seq) { return seq != 0 && seq % 2 == 0; }

}  // namespace tensortree::detail

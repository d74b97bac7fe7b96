// ReplayBuffer: a ring of `capacity` rows that several processes on one node open by name, without
// a server. The rows are a memmap tree in TensorDict's directory layout (TensorTree::load_memmap and
// Python's TensorDict.load_memmap open the directory) plus a control block beside them (the file
// replay.control: the insert cursor, a sequence number per row, the priorities' sum tree).
//
//   auto rb = ReplayBuffer::create(dir, {.capacity = 1 << 20});      // the learner, once
//   auto rb = ReplayBuffer::open(dir);                              // any other process
//   rb.extend(trajectory);             // rows of batch_size {T}; the first extend fixes the layout
//   ReplaySample s = rb.sample(256);   // s.batch: one consolidated buffer; s.indices: rows drawn
//
// Rows are reserved by an atomic cursor, written in place and then published; a reader checks a
// row's sequence number after copying it (a seqlock per row), so it never returns a torn or
// overwritten row. A process killed while writing leaves its rows unpublished: nobody waits for
// it, samplers skip them, and the next lap of the ring writes them again.
//
// A handle (one ReplayBuffer object) is for one thread at a time; open one per thread. Its sampler
// state (random generator, the permutation of WithoutReplacement) is its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensortree/device.hpp"
#include "tensortree/export.hpp"
#include "tensortree/path.hpp"
#include "tensortree/tree.hpp"

namespace tensortree {

// How sample() chooses rows (TorchRL's samplers). Prioritized needs a buffer with priorities: one
// created with ReplayBufferOptions::prioritized, or created with the Prioritized sampler.
enum class SamplerKind : unsigned char {
  Uniform,             // every published row equally likely, with replacement
  Prioritized,         // P(i) = p_i^alpha / sum_k p_k^alpha, with importance weights
  Slice,               // runs of slice_length consecutive steps of one trajectory
  WithoutReplacement,  // this handle draws every row once before it draws any twice: passes over
                       // a permutation of the rows, a batch that ends a pass completed from the
                       // next one (TorchRL's drop_last=False); sample(n) needs n <= size()
  Fifo,                // a queue shared by every handle: each row once, oldest first, to one sampler;
                       // rows overwritten before anyone sampled them are skipped, a row whose writer
                       // died gives its place in the batch to the next in the queue, and sample(n)
                       // waits (bounded) until n rows are there
};

// Reverb's rate limiter over the buffer's shared counters: inserts (rows reserved by extend) and
// samples (rows returned by sample). With diff = inserts * samples_per_insert - samples,
//   an extend of k rows proceeds when inserts + k < min_size_to_sample, or when its diff after
//   the insert stays <= max_diff;
//   a sample of n rows proceeds when inserts >= min_size_to_sample and its diff after the sample
//   stays >= min_diff.
// Otherwise the call waits for the other side (at most the handle's timeout, then Timeout).
struct RateLimiterOptions {
  double samples_per_insert = 1.0;
  std::int64_t min_size_to_sample = 0;
  double min_diff = -std::numeric_limits<double>::infinity();
  double max_diff = std::numeric_limits<double>::infinity();

  // Samples wait until `n` rows were inserted; inserts never wait (Reverb's MinSize).
  static RateLimiterOptions min_size(std::int64_t n) { return {1.0, n, -kUnlimited, kUnlimited}; }
  // About `samples_per_insert` rows sampled per row inserted once `min_size` rows are in, within
  // `error_buffer` samples either way (Reverb's SampleToInsertRatio).
  static RateLimiterOptions sample_to_insert_ratio(double samples_per_insert, std::int64_t min_size,
                                                   double error_buffer) {
    const double offset = samples_per_insert * static_cast<double>(min_size);
    return {samples_per_insert, min_size, offset - error_buffer, offset + error_buffer};
  }

 private:
  static constexpr double kUnlimited = std::numeric_limits<double>::infinity();
};

// Fixed when the buffer is created; every process that opens it shares them.
struct ReplayBufferOptions {
  std::int64_t capacity = 0;  // rows in the ring
  bool prioritized = false;   // keep a sum tree of priorities in the control block (implied when
                              // create() is given the Prioritized sampler)
  double alpha = 0.6;         // priorities are stored as (p + eps)^alpha (TorchRL's PrioritizedSampler)
  double eps = 1e-8;
  RateLimiterOptions rate_limiter = {};  // no limit by default
};

// This handle's view: how it samples and how long it waits.
struct ReplayOpenOptions {
  SamplerKind sampler = SamplerKind::Uniform;
  double beta = 0.4;                  // importance-weight exponent (Prioritized)
  std::int64_t slice_length = 0;      // Slice: steps per slice; sample(n) needs n a multiple of it
  Path trajectory_key = {"trajectory"};  // Slice: an integer leaf of one element per row
  std::uint64_t seed = 0;             // 0: a seed of its own per handle
  // Bounds every wait: for the layout another process is creating, for a row a live writer of the
  // previous lap still holds, for a published row to sample, for the priorities' lock.
  std::chrono::milliseconds timeout{10000};
};

struct CheckpointOptions {
  // Every file reaches stable storage before the checkpoint is published (else it survives a
  // killed process, not a power loss).
  bool durable = true;
};

// What a checkpoint holds: the insert cursor and sample count it noted, and the rows it kept.
struct CheckpointInfo {
  std::uint64_t inserted = 0;
  std::uint64_t sampled = 0;
  std::int64_t rows = 0;
};

struct SampleOptions {
  // cuda:N gathers on the host into pinned staging and uploads the batch in one copy.
  Device device = Device::cpu();
  // Gathers into this buffer when it is large enough and on `device` (an earlier sample's
  // batch.storage(), say): no allocation, and the earlier batch's values are overwritten.
  StoragePtr reuse = {};
};

// What sample(n) returns: the rows, the storage rows they came from, and (Prioritized) the
// importance weights (p_i / min_k p_k)^-beta of each, as TorchRL computes them; empty otherwise.
struct ReplaySample {
  TensorTree batch;                   // batch_size {n, ...}, consolidated
  std::vector<std::int64_t> indices;  // batch row i came from storage row indices[i]
  std::vector<double> weights;
};

class TT_API ReplayBuffer {
 public:
  // Creates the control block in `dir` (made if absent); the rows appear at the first extend. With
  // open_options.sampler Prioritized the buffer keeps priorities whatever options.prioritized says.
  // InvalidArgument when `dir` already holds a replay buffer or anything but an empty directory, or
  // for options that cannot hold; a create that fails leaves no file or directory behind.
  static ReplayBuffer create(const std::filesystem::path& dir, const ReplayBufferOptions& options,
                             const ReplayOpenOptions& open_options = {});
  // Opens a buffer another process created. InvalidArgument ("not a replay buffer (no
  // replay.control): create it first") for a directory without one; CorruptData for a truncated
  // or damaged control block or data directory, NotSupported for one a newer format wrote,
  // SchemaMismatch when the data directory holds another layout than the control block records.
  static ReplayBuffer open(const std::filesystem::path& dir, const ReplayOpenOptions& options = {});
  // Where a buffer named `name` lives in shared memory: /dev/shm/tensortree-replay-<name> (a tmpfs;
  // weight publications follow the same rule, WeightPublisher::shared_memory_path). Create/open it
  // there to keep the rows in memory only. InvalidArgument for a name that is not one plain file name.
  static std::filesystem::path shared_memory_path(std::string_view name);

  ReplayBuffer(ReplayBuffer&& other) noexcept;
  ReplayBuffer& operator=(ReplayBuffer&& other) noexcept;
  ReplayBuffer(const ReplayBuffer&) = delete;
  ReplayBuffer& operator=(const ReplayBuffer&) = delete;
  ~ReplayBuffer();

  // Appends rows (a tree of batch_size {k} at its root, CPU or CUDA leaves). The first extend of
  // the buffer fixes the layout: every later tree needs the same keys, dtypes and row shapes
  // (SchemaMismatch naming the leaf otherwise). A tree of more than `capacity` rows keeps its last
  // `capacity` rows.
  void extend(const TensorTree& rows);
  // n rows drawn by this handle's sampler, gathered into one consolidated buffer. Waits while the
  // buffer is empty (no extend yet), for rows being written and for the rate limiter, each at most
  // the handle's timeout (ReplayOpenOptions::timeout, 10 s by default), then throws Timeout: a
  // sample() on a buffer nobody fills returns after that wait, not at once. A sample that throws is
  // not counted by the rate limiter.
  ReplaySample sample(std::int64_t n, const SampleOptions& options = {});
  // Prioritized buffers: sets the priorities of storage rows `indices` (as sample() returned them).
  void update_priority(std::span<const std::int64_t> indices, std::span<const double> priorities);

  // Writes a copy of the buffer (rows, cursor, priorities, rate-limiter counts) to `target` as a
  // buffer directory of its own: ReplayBuffer::open(target) resumes from it, and its checkpoint()
  // copies it back to wherever the live buffer should be. Crash-safe: written into a temporary
  // sibling, synced, then renamed into place, replacing an earlier checkpoint atomically (a killed
  // checkpoint leaves the old one). Writers never stop: every published row is copied with its
  // seqlock checked (rows rewritten or being written during their copy are left out, unpublished
  // in the copy), then the cursor and sample count are noted. InvalidArgument before the first
  // extend, or when `target` holds something that is not a replay buffer.
  CheckpointInfo checkpoint(const std::filesystem::path& target, const CheckpointOptions& options = {});

  std::int64_t capacity() const;
  // Rows reserved so far (published or not), over all processes and laps.
  std::uint64_t inserted() const;
  // Rows returned by sample() so far, over all processes (the rate limiter's count).
  std::uint64_t sampled() const;
  // Rows that hold data: min(inserted(), capacity()).
  std::int64_t size() const;
  // True once the first extend fixed the layout.
  bool has_layout() const;
  // The storage itself, each leaf of batch_size {capacity, ...} viewing the mapped files (rows may
  // be being written: read them through sample()). InvalidArgument before the first extend.
  const TensorTree& storage();
  const std::filesystem::path& directory() const;

  struct State;  // defined in src/rl/replay/replay_state.hpp

 private:
  explicit ReplayBuffer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tensortree

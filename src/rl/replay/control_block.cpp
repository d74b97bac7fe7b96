#include "rl/replay/control_block.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include <xxhash.h>

#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "rl/process_identity.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace fs = std::filesystem;

namespace {

std::uint64_t header_checksum(const ControlHeader& header) {
  return XXH3_64bits(&header, offsetof(ControlHeader, checksum));
}

[[noreturn]] void corrupt(const fs::path& file, std::string_view why) {
  throw CorruptData(fmt::format("replay control block '{}' {}", file.string(), why));
}

// Checks the fields fixed at creation; the file is `file_size` bytes long.
void validate(const ControlHeader& h, std::uint64_t file_size, const fs::path& file) {
  if (h.magic != kControlMagic) corrupt(file, "is not a replay control block (bad magic)");
  if (h.version > kControlVersion) {
    throw NotSupported(fmt::format("replay control block '{}' was written by format version {}; this library "
                                   "reads version {}", file.string(), h.version, kControlVersion));
  }
  if (h.version != kControlVersion) {
    throw NotSupported(fmt::format("replay control block '{}' was written by format version {}, which this library "
                                   "(version {}) no longer reads: create the buffer again", file.string(), h.version,
                                   kControlVersion));
  }
  if (h.checksum != header_checksum(h)) corrupt(file, "has a header whose checksum does not match");
  if (h.header_bytes != kControlHeaderBytes) corrupt(file, fmt::format("has a header of {} bytes", h.header_bytes));
  if (h.capacity == 0 || h.capacity > static_cast<std::uint64_t>(kMaxCapacity)) {
    corrupt(file, fmt::format("has capacity {}, outside 1..{}", h.capacity, kMaxCapacity));
  }
  if (h.tree_leaves != 0 && h.tree_leaves != std::bit_ceil(h.capacity)) {
    corrupt(file, fmt::format("has a priority tree of {} leaves for capacity {}", h.tree_leaves, h.capacity));
  }
  if (!std::isfinite(h.alpha) || h.alpha < 0 || !std::isfinite(h.eps) || h.eps < 0) {
    corrupt(file, fmt::format("has alpha {} and eps {}", h.alpha, h.eps));
  }
  if (!(h.samples_per_insert > 0) || !std::isfinite(h.samples_per_insert) || std::isnan(h.min_diff) ||
      std::isnan(h.max_diff) || h.min_diff > h.max_diff || h.min_size_to_sample > h.capacity) {
    corrupt(file, fmt::format("has rate limits samples_per_insert {}, diff {}..{}, min size {}", h.samples_per_insert,
                              h.min_diff, h.max_diff, h.min_size_to_sample));
  }
  const auto geometry = control_geometry(h.capacity, h.tree_leaves);
  if (!geometry || geometry->file_bytes != h.file_bytes) corrupt(file, "records a size its capacity does not give");
  if (file_size != h.file_bytes) {
    corrupt(file, fmt::format("is {} bytes; its capacity of {} rows needs {} (truncated?)", file_size, h.capacity,
                              h.file_bytes));
  }
}

// The shared fields as the page was read, each within what the library could have written.
void validate_shared(const ControlHeader& h, const fs::path& file) {
  if (h.cursor > kMaxTickets) {
    corrupt(file, fmt::format("has insert cursor {}, beyond {} tickets (its rows' sequence numbers would wrap)",
                              h.cursor, kMaxTickets));
  }
  if (h.samples > kMaxTickets) corrupt(file, fmt::format("has sample count {}, beyond {}", h.samples, kMaxTickets));
  if (h.fifo_cursor > h.cursor) {
    corrupt(file, fmt::format("is damaged: fifo cursor {} is past the insert cursor {}", h.fifo_cursor, h.cursor));
  }
  const auto check_lock = [&](std::uint64_t word, std::string_view name) {
    if (!rl::names_a_process(word)) corrupt(file, fmt::format("has {} word {:#x}, which names no process", name, word));
  };
  check_lock(h.layout_lock, "layout lock");
  check_lock(h.priority_lock, "priority lock");
  if (!std::isfinite(h.max_priority) || h.max_priority < 0) {
    corrupt(file, fmt::format("has largest priority {}, not a finite non-negative number", h.max_priority));
  }
}

// Every byte of the header page that no field holds (padding, `reserved`, the rest of the page)
// is zero, as create() left it: a page written by anything else is refused.
void validate_unused(std::span<const std::byte> page, const fs::path& file) {
  std::vector<bool> used(page.size());
  const auto mark = [&](std::size_t offset, std::size_t bytes) { std::fill_n(used.begin() + offset, bytes, true); };
#define TT_FIELD(name) mark(offsetof(ControlHeader, name), sizeof(ControlHeader::name))
  TT_FIELD(magic); TT_FIELD(version); TT_FIELD(header_bytes); TT_FIELD(capacity); TT_FIELD(tree_leaves);
  TT_FIELD(alpha); TT_FIELD(eps); TT_FIELD(file_bytes); TT_FIELD(samples_per_insert); TT_FIELD(min_diff);
  TT_FIELD(max_diff); TT_FIELD(min_size_to_sample); TT_FIELD(checksum); TT_FIELD(cursor); TT_FIELD(samples);
  TT_FIELD(fifo_cursor); TT_FIELD(layout_fingerprint); TT_FIELD(layout_state); TT_FIELD(layout_lock);
  TT_FIELD(priority_lock); TT_FIELD(max_priority);
#undef TT_FIELD
  for (std::size_t i = 0; i < page.size(); ++i) {
    if (!used[i] && page[i] != std::byte{0}) {
      corrupt(file, fmt::format("has byte {} of its header set to {}: that byte is reserved or unused and must be "
                                "zero", i, static_cast<unsigned>(page[i])));
    }
  }
}

ControlHeader initial_header(const ReplayBufferOptions& options, const ControlGeometry& geometry) {
  ControlHeader h{};
  h.magic = kControlMagic;
  h.version = kControlVersion;
  h.header_bytes = kControlHeaderBytes;
  h.capacity = static_cast<std::uint64_t>(options.capacity);
  h.tree_leaves = options.prioritized ? std::bit_ceil(h.capacity) : 0;
  h.alpha = options.alpha;
  h.eps = options.eps;
  h.file_bytes = geometry.file_bytes;
  h.samples_per_insert = options.rate_limiter.samples_per_insert;
  h.min_diff = options.rate_limiter.min_diff;
  h.max_diff = options.rate_limiter.max_diff;
  h.min_size_to_sample = static_cast<std::uint64_t>(options.rate_limiter.min_size_to_sample);
  h.checksum = header_checksum(h);
  return h;
}

void check_options(const ReplayBufferOptions& options) {
  if (options.capacity <= 0 || options.capacity > kMaxCapacity) {
    throw InvalidArgument(fmt::format("ReplayBuffer: capacity {} is outside 1..{}", options.capacity, kMaxCapacity));
  }
  if (!std::isfinite(options.alpha) || options.alpha < 0 || !std::isfinite(options.eps) || options.eps < 0) {
    throw InvalidArgument(fmt::format("ReplayBuffer: alpha {} and eps {} must be finite and non-negative",
                                      options.alpha, options.eps));
  }
  const RateLimiterOptions& r = options.rate_limiter;
  if (!(r.samples_per_insert > 0) || !std::isfinite(r.samples_per_insert) || std::isnan(r.min_diff) ||
      std::isnan(r.max_diff) || r.min_diff > r.max_diff || r.min_size_to_sample < 0 ||
      r.min_size_to_sample > options.capacity) {
    throw InvalidArgument(fmt::format("ReplayBuffer: rate limits samples_per_insert {}, diff {}..{}, min size {} "
                                      "(positive ratio, min_diff <= max_diff, min size within the capacity {})",
                                      r.samples_per_insert, r.min_diff, r.max_diff, r.min_size_to_sample,
                                      options.capacity));
  }
}

}  // namespace

std::optional<ControlGeometry> control_geometry(std::uint64_t capacity, std::uint64_t tree_leaves) {
  ControlGeometry g;
  g.seq_offset = kControlHeaderBytes;
  const auto row_bytes = checked_mul<std::uint64_t>(capacity, 8);
  const auto owner_bytes = checked_mul<std::uint64_t>(capacity, 16);
  const auto tree_bytes = checked_mul<std::uint64_t>(tree_leaves, 16);
  if (!row_bytes || !owner_bytes || !tree_bytes) return std::nullopt;
  auto next = [](std::uint64_t offset, std::uint64_t bytes) -> std::optional<std::uint64_t> {
    const auto end = checked_add(offset, bytes);
    return end ? checked_align_up(*end) : std::nullopt;
  };
  const auto owner = next(g.seq_offset, *row_bytes);
  const auto sum = owner ? next(*owner, *owner_bytes) : std::nullopt;
  const auto min = sum ? next(*sum, *tree_bytes) : std::nullopt;
  const auto end = min ? next(*min, *tree_bytes) : std::nullopt;
  if (!end) return std::nullopt;
  g.owner_offset = *owner;
  g.sum_offset = *sum;
  g.min_offset = *min;
  g.file_bytes = *end;
  return g;
}

ControlBlock::ControlBlock(Mapping mapping, fs::path file, const ControlHeader& fixed)
    : mapping_(std::move(mapping)),
      file_(std::move(file)),
      capacity_(static_cast<std::int64_t>(fixed.capacity)),
      tree_leaves_(fixed.tree_leaves),
      alpha_(fixed.alpha),
      eps_(fixed.eps),
      limits_{fixed.samples_per_insert, static_cast<std::int64_t>(fixed.min_size_to_sample), fixed.min_diff,
              fixed.max_diff} {
  auto* base = static_cast<std::byte*>(mapping_.data());
  const ControlGeometry g = *control_geometry(fixed.capacity, fixed.tree_leaves);
  seq_ = reinterpret_cast<std::uint64_t*>(base + g.seq_offset);
  owner_ = reinterpret_cast<std::uint64_t*>(base + g.owner_offset);
  sum_ = reinterpret_cast<double*>(base + g.sum_offset);
  min_ = reinterpret_cast<double*>(base + g.min_offset);
}

ControlBlock ControlBlock::create(const fs::path& dir, const ReplayBufferOptions& options) {
  check_options(options);
  const auto geometry = control_geometry(static_cast<std::uint64_t>(options.capacity),
                                         options.prioritized ? std::bit_ceil(static_cast<std::uint64_t>(options.capacity)) : 0);
  const fs::path file = dir / kControlFileName;
  const fs::path temp = dir / fmt::format(".{}.{}", kControlFileName, ::getpid());
  FileDescriptor fd = open_path(temp, O_RDWR | O_CREAT | O_TRUNC, 0644);
  // Sparse: the rows' arrays and the trees start as zeros, which is what "never written" and
  // "no priority" are.
  if (::ftruncate(fd.get(), static_cast<off_t>(geometry->file_bytes)) != 0) TT_OS_ERROR("ftruncate", temp);
  const ControlHeader h = initial_header(options, *geometry);
  write_all_at(fd.get(), &h, sizeof h, 0, temp);
  Mapping mapping(fd.get(), geometry->file_bytes, true, temp);
  // link() fails when the name exists: of two processes creating one buffer, one wins.
  const int linked = ::link(temp.c_str(), file.c_str());
  const int err = errno;
  ::unlink(temp.c_str());
  if (linked != 0 && err == EEXIST) {
    throw InvalidArgument(fmt::format("ReplayBuffer::create: '{}' already holds a replay buffer", dir.string()));
  }
  if (linked != 0) throw_os_error("link", file, err, __FILE__, __LINE__);
  return ControlBlock(std::move(mapping), file, h);
}

ControlBlock ControlBlock::open(const fs::path& dir) {
  const fs::path file = dir / kControlFileName;
  auto [fd, err] = open_at(AT_FDCWD, file.string(), O_RDWR);
  if (!fd.valid() && (err == ENOENT || err == ENOTDIR)) {
    throw InvalidArgument(fmt::format("ReplayBuffer::open: '{}' is not a replay buffer (no {}): create it first "
                                      "(ReplayBuffer::create)", dir.string(), kControlFileName));
  }
  if (!fd.valid()) throw_os_error("open", file, err, __FILE__, __LINE__);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) TT_OS_ERROR("fstat", file);
  if (!S_ISREG(st.st_mode)) corrupt(file, "is not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < kControlHeaderBytes) {
    corrupt(file, fmt::format("is {} bytes, shorter than its {}-byte header (truncated?)", size, kControlHeaderBytes));
  }
  std::vector<std::byte> page(kControlHeaderBytes);
  read_all(fd.get(), page.data(), page.size(), file);
  ControlHeader h{};
  std::memcpy(&h, page.data(), sizeof h);
  validate(h, size, file);
  validate_shared(h, file);
  validate_unused(page, file);
  Mapping mapping(fd.get(), h.file_bytes, true, file);
  // Sizes and offsets come from this validated copy, never from the mapping, which another process
  // could change under us.
  return ControlBlock(std::move(mapping), file, h);
}

}  // namespace tensortree::detail

#include "transport/staged/chunked_work.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "core/pinned_pool.hpp"
#include "core/text_format.hpp"
#include "core/wait_bounded.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// How many chunks are copied to pinned memory ahead of the one being posted.
constexpr std::size_t kCopiesAhead = 4;

std::byte* bytes_of(const Tensor& tensor) { return static_cast<std::byte*>(tensor.data_ptr()); }

// The length of one piece of a side, checked against the other side's.
std::int64_t piece_of(const std::optional<ChunkedWork::Side>& in, const std::optional<ChunkedWork::Side>& out) {
  if (!in && !out) throw InvalidArgument("StagedBackend: a chunked operation needs a tensor to read or to write");
  std::optional<std::int64_t> piece;
  std::optional<std::size_t> itemsize;
  for (const std::optional<ChunkedWork::Side>* side : {&in, &out}) {
    if (!*side) continue;
    const ChunkedWork::Side& s = **side;
    if (s.rows < 1 || s.user.numel() % s.rows != 0 || s.pinned.numel() != s.user.numel() ||
        s.pinned.itemsize() != s.user.itemsize()) {
      throw InvalidArgument(fmt::format("StagedBackend: a chunked side of {} elements does not split into {} pieces "
                                        "with a pinned copy of {} elements",
                                        s.user.numel(), s.rows, s.pinned.numel()));
    }
    const std::int64_t length = s.user.numel() / s.rows;
    if ((piece && *piece != length) || (itemsize && *itemsize != s.user.itemsize())) {
      throw InvalidArgument(fmt::format("StagedBackend: a chunked operation's pieces differ: {} and {} elements",
                                        *piece, length));
    }
    piece = length;
    itemsize = s.user.itemsize();
  }
  return *piece;
}

std::size_t itemsize_of(const std::optional<ChunkedWork::Side>& in, const std::optional<ChunkedWork::Side>& out) {
  return in ? in->user.itemsize() : out->user.itemsize();
}

}  // namespace

Tensor pinned_tensor(DType dtype, Shape shape, std::size_t nbytes) {
  return Tensor(PinnedPool::shared().storage(nbytes), 0, dtype, std::move(shape), {});
}

Tensor flat(const Tensor& tensor) {
  return Tensor(tensor.storage(), tensor.byte_offset(), tensor.dtype(), {tensor.numel()}, {});
}

ChunkedWork::Side ChunkedWork::staged(const Tensor& user, std::int64_t rows) {
  return {user, pinned_tensor(user.dtype(), {user.numel()}, user.nbytes()), rows};
}

ChunkedWork::ChunkedWork(std::optional<Side> in, std::optional<Side> out, std::size_t chunk_bytes, End end,
                         std::shared_ptr<const StagedBackend::DeviceStreams> streams, Start start, int peer)
    : in_(std::move(in)),
      out_(std::move(out)),
      piece_(piece_of(in_, out_)),
      chunk_elements_(std::max<std::int64_t>(1, static_cast<std::int64_t>(chunk_bytes / itemsize_of(in_, out_)))),
      count_(end == End::Short ? piece_ / chunk_elements_ + 1 : (piece_ + chunk_elements_ - 1) / chunk_elements_),
      streams_(std::move(streams)),
      start_(std::move(start)),
      peer_(peer) {
  if (streams_ && out_) back_event_ = cuda::CopyEvent(streams_->to_device.device());
}

ChunkedWork::~ChunkedWork() {
  for (const cuda::CopyEvent& event : ahead_) event.wait_quietly();
  back_event_.wait_quietly();
}

void ChunkedWork::post(std::int64_t begin, std::int64_t end) {
  const bool queued_in = in_ && streams_;
  if (queued_in) {
    const auto ahead = static_cast<std::int64_t>(std::min<std::size_t>(kCopiesAhead, static_cast<std::size_t>(end - begin)));
    ahead_.clear();
    for (std::int64_t i = 0; i < ahead; ++i) ahead_.emplace_back(streams_->to_host.device());
    for (std::int64_t i = begin; i < begin + ahead; ++i) queue_in(i, begin);
  }
  for (std::int64_t i = begin; i < end; ++i) {
    if (queued_in) {
      const cuda::CopyEvent& copied = ahead_[slot(i, begin)];
      // Device work only (no peer involved): unbounded, but the host transfers keep moving.
      poll_until([&] { return copied.done() || (advance(true), false); }, std::nullopt, WaitStyle::Spin);
    } else if (in_) {
      copy_chunk(*in_, i, true);
    }
    chunks_.push_back(start_(in_ ? pinned_chunk(*in_, i) : Tensor(), out_ ? pinned_chunk(*out_, i) : Tensor(), peer_));
    if (queued_in && i + static_cast<std::int64_t>(ahead_.size()) < end) {
      queue_in(i + static_cast<std::int64_t>(ahead_.size()), begin);
    }
  }
}

void ChunkedWork::learn_source() {
  if (source_known_) return;
  chunks_.front()->wait();
  peer_ = chunks_.front()->source_rank();
  source_known_ = true;
  post(1, count_);
}

int ChunkedWork::source_rank() const {
  if (!from_any_source_ || !source_known_) return Work::source_rank();
  return peer_;
}

bool ChunkedWork::test() {
  if (!source_known_) {
    if (!chunks_.front()->is_completed()) return false;
    learn_source();
  }
  if (!advance(false)) return false;
  return !back_event_queued_ || back_event_.done();
}

void ChunkedWork::block() {
  learn_source();
  for (; settled_ < count_; ++settled_) {
    chunks_[static_cast<std::size_t>(settled_)]->wait();
    if (out_) queue_back(settled_);
  }
  if (back_event_queued_) back_event_.wait();
}

std::int64_t ChunkedWork::chunk_length(std::int64_t index) const {
  return std::min(chunk_elements_, piece_ - chunk_start(index));
}

Tensor ChunkedWork::pinned_chunk(const Side& side, std::int64_t index) const {
  return side.pinned.narrow(0, side.rows * chunk_start(index), side.rows * chunk_length(index));
}

std::size_t ChunkedWork::slot(std::int64_t index, std::int64_t begin) const {
  return static_cast<std::size_t>(index - begin) % ahead_.size();
}

void ChunkedWork::copy_chunk(const Side& side, std::int64_t index, bool to_pinned) const {
  const std::size_t itemsize = side.user.itemsize();
  const std::size_t width = static_cast<std::size_t>(chunk_length(index)) * itemsize;
  const std::size_t user_pitch = static_cast<std::size_t>(piece_) * itemsize;
  const auto rows = static_cast<std::size_t>(side.rows);
  // Row r of the chunk: at r * piece + start in the caller's tensor, at r * length in pinned memory.
  std::byte* const user = bytes_of(side.user) + static_cast<std::size_t>(chunk_start(index)) * itemsize;
  std::byte* const pinned = bytes_of(pinned_chunk(side, index));
  if (width == 0) return;
  if (!streams_) {
    for (std::size_t r = 0; r < rows; ++r) {
      std::byte* const u = user + r * user_pitch;
      std::byte* const p = pinned + r * width;
      if (to_pinned) {
        std::memcpy(p, u, width);
      } else {
        std::memcpy(u, p, width);
      }
    }
    return;
  }
  if (to_pinned) {
    streams_->to_host.copy_rows_async(pinned, width, user, user_pitch, width, rows);
  } else {
    streams_->to_device.copy_rows_async(user, user_pitch, pinned, width, width, rows);
  }
}

void ChunkedWork::queue_in(std::int64_t index, std::int64_t begin) {
  copy_chunk(*in_, index, true);
  ahead_[slot(index, begin)].record(streams_->to_host);
}

void ChunkedWork::queue_back(std::int64_t index) {
  copy_chunk(*out_, index, false);
  if (!streams_) return;
  back_event_.record(streams_->to_device);
  back_event_queued_ = true;
}

bool ChunkedWork::advance(bool quiet) {
  while (settled_ < static_cast<std::int64_t>(chunks_.size())) {
    const WorkPtr& host = chunks_[static_cast<std::size_t>(settled_)];
    if (!host->is_completed()) return false;
    if (std::exception_ptr error = host->exception()) {
      if (quiet) return false;
      std::rethrow_exception(error);
    }
    if (out_) queue_back(settled_);
    ++settled_;
  }
  return settled_ == count_;
}

}  // namespace tensortree::detail

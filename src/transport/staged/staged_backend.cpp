#include "transport/staged/staged_backend.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/pinned_pool.hpp"
#include "core/wait_bounded.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// How many chunks are copied to pinned memory ahead of the one being posted.
constexpr std::size_t kCopiesAhead = 4;

// A pinned host tensor of `numel` elements of `dtype`, from the process's pool: staging allocates
// no page-locked memory once the pool holds buffers of the sizes in use. The buffer returns to the
// pool when the last tensor or Work using it ends.
Tensor pinned_tensor(DType dtype, Shape shape, std::size_t nbytes) {
  return Tensor(PinnedPool::shared().storage(nbytes), 0, dtype, std::move(shape), {});
}

// A contiguous tensor as one dimension of its own elements.
Tensor flat(const Tensor& tensor) {
  return Tensor(tensor.storage(), tensor.byte_offset(), tensor.dtype(), {tensor.numel()}, {});
}

// The host copies of one operation's tensors (not chunked), and the tensors its results go back to.
class Staging {
 public:
  // A host buffer holding `tensor`'s values (undefined stays undefined).
  Tensor in(const Tensor& tensor) {
    if (!tensor.defined()) return tensor;
    Tensor host = host_buffer(tensor);
    host.copy_(tensor);
    return host;
  }

  // A host buffer whose values are copied into `tensor` when the operation has finished.
  Tensor out(const Tensor& tensor) {
    if (!tensor.defined()) return tensor;
    Tensor host = host_buffer(tensor);
    copy_back_.emplace_back(tensor, host);
    return host;
  }

  // Both: the operation reads and writes the buffer (in-place reductions).
  Tensor in_out(const Tensor& tensor) {
    Tensor host = in(tensor);
    if (tensor.defined()) copy_back_.emplace_back(tensor, host);
    return host;
  }

  WorkPtr after(WorkPtr host_work) {
    if (copy_back_.empty()) return host_work;
    return Work::then(std::move(host_work), [copies = std::move(copy_back_)] {
      for (const auto& [device, host] : copies) device.copy_(host);
    });
  }

 private:
  static Tensor host_buffer(const Tensor& tensor) { return pinned_tensor(tensor.dtype(), tensor.shape(), tensor.nbytes()); }

  std::vector<std::pair<Tensor, Tensor>> copy_back_;
};

}  // namespace

// One operation cut into chunks (see the header). Outbound, in the backend call: each chunk is
// copied to pinned memory (kCopiesAhead chunks ahead, on the to-host stream) and its host
// operation posted as soon as it is there. Inbound, as the Work is driven: each chunk whose host
// operation completed is copied back to the caller's tensor on the to-device stream, in order.
class ChunkedWork final : public Work {
 public:
  // Starts one chunk's host operation on `chunk` (a view of the pinned buffer) with `peer`.
  using Start = std::function<WorkPtr(const Tensor& chunk, int peer)>;

  // How a message ends. Point to point, its last chunk is always shorter than a chunk (empty when
  // the length is a multiple of it), so that a receiver expecting a different length gets a
  // chunk of the wrong length and fails instead of keeping a prefix. Collectives have equal
  // lengths on every rank (dist_ops checks them) and need no such end.
  enum class End : unsigned char { Short, Exact };

  // `user` is the caller's tensor, flat; the pinned buffer is made alike.
  ChunkedWork(Tensor user, std::size_t chunk_bytes, End end, std::shared_ptr<const StagedBackend::DeviceStreams> streams,
              bool copy_back, Start start, int peer)
      : user_(std::move(user)),
        staging_(pinned_tensor(user_.dtype(), {user_.numel()}, user_.nbytes())),
        chunk_elements_(std::max<std::int64_t>(1, static_cast<std::int64_t>(chunk_bytes / user_.itemsize()))),
        count_(end == End::Short ? user_.numel() / chunk_elements_ + 1
                                 : (user_.numel() + chunk_elements_ - 1) / chunk_elements_),
        streams_(std::move(streams)),
        copy_back_(copy_back),
        start_(std::move(start)),
        peer_(peer) {
    if (streams_ && copy_back_) back_event_ = cuda::CopyEvent(streams_->to_device.device());
  }
  ChunkedWork(const ChunkedWork&) = delete;
  ChunkedWork& operator=(const ChunkedWork&) = delete;
  // Copies still queued read or write the pinned buffer and the caller's tensor: they finish
  // before either is released. The chunks' host Works then end as the host backend ends them.
  ~ChunkedWork() override {
    for (const cuda::CopyEvent& event : ahead_) event.wait_quietly();
    back_event_.wait_quietly();
  }

  std::int64_t count() const { return count_; }

  // Posts chunks [begin, end) in order; with `copy_in`, each after its values reached pinned memory.
  void post(bool copy_in, std::int64_t begin, std::int64_t end) {
    const bool queued_in = copy_in && streams_;
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
      } else if (copy_in) {
        std::memcpy(chunk(staging_, i).data_ptr(), chunk(user_, i).data_ptr(), chunk(user_, i).nbytes());
      }
      chunks_.push_back(start_(chunk(staging_, i), peer_));
      if (queued_in && i + static_cast<std::int64_t>(ahead_.size()) < end) {
        queue_in(i + static_cast<std::int64_t>(ahead_.size()), begin);
      }
    }
  }

  // A receive from kAnySource: once its first chunk has arrived (waiting for it within the host
  // backend's timeout), the rest are posted from that chunk's sender.
  void learn_source() {
    if (source_known_) return;
    chunks_.front()->wait();
    peer_ = chunks_.front()->source_rank();
    source_known_ = true;
    post(false, 1, count_);
  }

  int source_rank() const override {
    if (!from_any_source_ || !source_known_) return Work::source_rank();
    return peer_;
  }

  // A receive from kAnySource (`peer` is then ignored): post() only its first chunk.
  void receive_from_any_source() {
    from_any_source_ = true;
    source_known_ = false;
  }

 protected:
  bool test() override {
    if (!source_known_) {
      if (!chunks_.front()->is_completed()) return false;
      learn_source();
    }
    if (!advance(false)) return false;
    return !back_event_queued_ || back_event_.done();
  }

  void block() override {
    learn_source();
    for (; settled_ < count_; ++settled_) {
      chunks_[static_cast<std::size_t>(settled_)]->wait();
      if (copy_back_) queue_back(settled_);
    }
    if (back_event_queued_) back_event_.wait();
  }

 private:
  Tensor chunk(const Tensor& whole, std::int64_t index) const {
    const std::int64_t start = index * chunk_elements_;
    return whole.narrow(0, start, std::min(chunk_elements_, whole.numel() - start));
  }

  std::size_t slot(std::int64_t index, std::int64_t begin) const {
    return static_cast<std::size_t>(index - begin) % ahead_.size();
  }

  void queue_in(std::int64_t index, std::int64_t begin) {
    const Tensor from = chunk(user_, index);
    streams_->to_host.copy_async(chunk(staging_, index).data_ptr(), from.data_ptr(), from.nbytes());
    ahead_[slot(index, begin)].record(streams_->to_host);
  }

  void queue_back(std::int64_t index) {
    const Tensor to = chunk(user_, index);
    if (!streams_) {
      std::memcpy(to.data_ptr(), chunk(staging_, index).data_ptr(), to.nbytes());
      return;
    }
    streams_->to_device.copy_async(to.data_ptr(), chunk(staging_, index).data_ptr(), to.nbytes());
    back_event_.record(streams_->to_device);
    back_event_queued_ = true;
  }

  // Copies back every chunk that has arrived, in order, without blocking; true once all have.
  // `quiet`: stops at a failed chunk instead of raising its error (the Work raises it later).
  bool advance(bool quiet) {
    while (settled_ < static_cast<std::int64_t>(chunks_.size())) {
      const WorkPtr& host = chunks_[static_cast<std::size_t>(settled_)];
      if (!host->is_completed()) return false;
      if (std::exception_ptr error = host->exception()) {
        if (quiet) return false;
        std::rethrow_exception(error);
      }
      if (copy_back_) queue_back(settled_);
      ++settled_;
    }
    return settled_ == count_;
  }

  const Tensor user_;
  const Tensor staging_;
  const std::int64_t chunk_elements_;
  const std::int64_t count_;
  const std::shared_ptr<const StagedBackend::DeviceStreams> streams_;  // null for a host tensor
  const bool copy_back_;
  const Start start_;
  int peer_;
  bool from_any_source_ = false;
  bool source_known_ = true;
  std::vector<WorkPtr> chunks_;             // the host operations posted, in chunk order
  std::int64_t settled_ = 0;                // chunks [0, settled_) completed (and copied back)
  std::vector<cuda::CopyEvent> ahead_;      // one per chunk copied ahead, reused in turn
  cuda::CopyEvent back_event_;              // after the last copy back queued
  bool back_event_queued_ = false;
};

StagedBackend::StagedBackend(Engine& host, StagedBackendOptions options)
    : host_(host),
      options_(options),
      name_(std::string(host.name()) + " (staged through pinned host memory)") {
  if (options_.chunk_bytes == 0) throw InvalidArgument("StagedBackend: chunk_bytes must be at least 1");
}

bool StagedBackend::chunked(const Tensor& tensor) const {
  return tensor.defined() && tensor.nbytes() > options_.chunk_bytes && tensor.is_contiguous();
}

std::shared_ptr<const StagedBackend::DeviceStreams> StagedBackend::streams_for(const Tensor& tensor) {
  const Device device = tensor.device();
  if (device.is_cpu()) return nullptr;
  const std::lock_guard lock(mutex_);
  std::shared_ptr<const DeviceStreams>& streams = streams_[device.index()];
  if (!streams) {
    streams = std::make_shared<const DeviceStreams>(
        DeviceStreams{cuda::CopyStream(device.index()), cuda::CopyStream(device.index())});
  }
  return streams;
}

void StagedBackend::settle_any_source_receive(int tag) {
  std::shared_ptr<ChunkedWork> unsettled;
  {
    const std::lock_guard lock(mutex_);
    const auto found = unsettled_any_source_.find(tag);
    if (found == unsettled_any_source_.end()) return;
    unsettled = found->second.lock();
    unsettled_any_source_.erase(found);
  }
  if (!unsettled) return;
  try {
    unsettled->learn_source();
  } catch (const Timeout&) {
    const std::lock_guard lock(mutex_);
    unsettled_any_source_.emplace(tag, unsettled);
    throw;
  } catch (...) {
    // Its first chunk failed: nothing more was posted, and its own Work reports the error.
  }
}

WorkPtr StagedBackend::broadcast(const Tensor& tensor, int root) {
  if (chunked(tensor)) {
    const bool sending = rank() == root;
    auto work = std::make_shared<ChunkedWork>(
        tensor.byte_view(), options_.chunk_bytes, ChunkedWork::End::Exact, streams_for(tensor), !sending,
        [this, root](const Tensor& chunk, int) { return host_.broadcast(chunk, root); }, root);
    work->post(sending, 0, work->count());
    return work;
  }
  Staging staging;
  const Tensor host = rank() == root ? staging.in(tensor) : staging.out(tensor);
  return staging.after(host_.broadcast(host, root));
}

WorkPtr StagedBackend::all_reduce(const Tensor& tensor, ReduceOp op) {
  if (chunked(tensor)) {
    // Reductions are element-wise: each chunk of whole elements reduces on its own.
    auto work = std::make_shared<ChunkedWork>(
        flat(tensor), options_.chunk_bytes, ChunkedWork::End::Exact, streams_for(tensor), true,
        [this, op](const Tensor& chunk, int) { return host_.all_reduce(chunk, op); }, -1);
    work->post(true, 0, work->count());
    return work;
  }
  Staging staging;
  const Tensor host = staging.in_out(tensor);
  return staging.after(host_.all_reduce(host, op));
}

WorkPtr StagedBackend::reduce(const Tensor& tensor, int root, ReduceOp op) {
  if (chunked(tensor)) {
    auto work = std::make_shared<ChunkedWork>(
        flat(tensor), options_.chunk_bytes, ChunkedWork::End::Exact, streams_for(tensor), rank() == root,
        [this, root, op](const Tensor& chunk, int) { return host_.reduce(chunk, root, op); }, root);
    work->post(true, 0, work->count());
    return work;
  }
  Staging staging;
  const Tensor host = rank() == root ? staging.in_out(tensor) : staging.in(tensor);
  return staging.after(host_.reduce(host, root, op));
}

WorkPtr StagedBackend::all_gather(const Tensor& output, const Tensor& input) {
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = staging.out(output);
  return staging.after(host_.all_gather(host_output, host_input));
}

WorkPtr StagedBackend::gather(const Tensor& output, const Tensor& input, int root) {
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = rank() == root ? staging.out(output) : Tensor();
  return staging.after(host_.gather(host_output, host_input, root));
}

WorkPtr StagedBackend::scatter(const Tensor& output, const Tensor& input, int root) {
  Staging staging;
  const Tensor host_input = rank() == root ? staging.in(input) : Tensor();
  const Tensor host_output = staging.out(output);
  return staging.after(host_.scatter(host_output, host_input, root));
}

WorkPtr StagedBackend::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = staging.out(output);
  return staging.after(host_.reduce_scatter(host_output, host_input, op));
}

WorkPtr StagedBackend::all_to_all(const Tensor& output, const Tensor& input,
                                  std::span<const std::int64_t> output_counts,
                                  std::span<const std::int64_t> input_counts) {
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = staging.out(output);
  return staging.after(host_.all_to_all(host_output, host_input, output_counts, input_counts));
}

WorkPtr StagedBackend::send(const Tensor& tensor, int dst, int tag) {
  if (chunked(tensor)) {
    auto work = std::make_shared<ChunkedWork>(
        tensor.byte_view(), options_.chunk_bytes, ChunkedWork::End::Short, streams_for(tensor), false,
        [this, tag](const Tensor& chunk, int peer) { return host_.send(chunk, peer, tag); }, dst);
    work->post(true, 0, work->count());
    return work;
  }
  Staging staging;
  return staging.after(host_.send(staging.in(tensor), dst, tag));
}

WorkPtr StagedBackend::chunked_recv(const Tensor& tensor, int src, int tag) {
  auto work = std::make_shared<ChunkedWork>(
      tensor.byte_view(), options_.chunk_bytes, ChunkedWork::End::Short, streams_for(tensor), true,
      [this, tag](const Tensor& chunk, int peer) { return host_.recv(chunk, peer, tag); }, src);
  if (src != kAnySource) {
    work->post(false, 0, work->count());
    return work;
  }
  work->receive_from_any_source();
  work->post(false, 0, 1);
  const std::lock_guard lock(mutex_);
  unsettled_any_source_[tag] = work;
  return work;
}

WorkPtr StagedBackend::recv(const Tensor& tensor, int src, int tag) {
  settle_any_source_receive(tag);
  if (chunked(tensor)) return chunked_recv(tensor, src, tag);
  Staging staging;
  return staging.after(host_.recv(staging.out(tensor), src, tag));
}

WorkPtr StagedBackend::batch_p2p(std::span<const P2POp> ops) {
  for (const P2POp& op : ops) {
    if (op.kind == P2POp::Kind::Recv) settle_any_source_receive(op.tag);
  }
  if (std::none_of(ops.begin(), ops.end(), [this](const P2POp& op) { return chunked(op.tensor); })) {
    Staging staging;
    std::vector<P2POp> host_ops(ops.begin(), ops.end());
    for (P2POp& op : host_ops) {
      op.tensor = op.kind == P2POp::Kind::Send ? staging.in(op.tensor) : staging.out(op.tensor);
    }
    return staging.after(host_.batch_p2p(host_ops));
  }
  // One operation at a time, in the batch's order: the host backend matches them as it would
  // have matched the batch.
  std::vector<WorkPtr> works;
  works.reserve(ops.size());
  for (const P2POp& op : ops) {
    works.push_back(op.kind == P2POp::Kind::Send ? send(op.tensor, op.peer, op.tag) : recv(op.tensor, op.peer, op.tag));
  }
  return Work::all(std::move(works));
}

WorkPtr StagedBackend::barrier() { return host_.barrier(); }

}  // namespace tensortree::detail

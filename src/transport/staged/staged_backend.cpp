#include "transport/staged/staged_backend.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "transport/staged/chunked_work.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

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
  static Tensor host_buffer(const Tensor& tensor) {
    return pinned_tensor(tensor.dtype(), tensor.shape(), tensor.nbytes());
  }

  std::vector<std::pair<Tensor, Tensor>> copy_back_;
};

// The chunked collectives cut every rank's piece by bytes and hand the host backend byte views, so
// they check here what the host backend would have checked on the whole tensors: `all` holds
// `size` pieces of `piece`'s dtype, on `piece`'s device.
void check_pieces(std::string_view op, const Tensor& all, std::string_view all_name, const Tensor& piece,
                  std::string_view piece_name, int size) {
  if (!all.defined()) {
    throw InvalidArgument(fmt::format("StagedBackend {}: {} is undefined; it must hold {} blocks of {}", op, all_name,
                                      size, piece_name));
  }
  if (all.dtype() != piece.dtype() || all.numel() != piece.numel() * size || all.device() != piece.device()) {
    throw InvalidArgument(fmt::format(
        "StagedBackend {}: {} must hold {} x {} elements of {} on {} (the {}), got {} elements of {} on {}", op,
        all_name, size, piece.numel(), dtype_name(piece.dtype()), piece.device().str(), piece_name, all.numel(),
        dtype_name(all.dtype()), all.device().str()));
  }
}

// A tensor a chunked collective writes, made contiguous: the caller's own when it is, else a
// contiguous copy written back to it when the collective has finished. Every rank cuts a
// collective's pieces alike whatever the layout of its own tensors, so no rank's layout may
// decide whether it is chunked.
class ContiguousOutput {
 public:
  explicit ContiguousOutput(const Tensor& user) : user_(user), tensor_(user.contiguous()) {}
  const Tensor& tensor() const { return tensor_; }
  WorkPtr after(WorkPtr work) const {
    if (user_.is_contiguous()) return work;
    return Work::then(std::move(work), [user = user_, written = tensor_] { user.copy_(written); });
  }

 private:
  Tensor user_;
  Tensor tensor_;
};

// Posts every chunk of a collective (the same host operation on each rank's chunk i, see
// chunked_work.hpp), `start` taking the chunk's pinned input and output views.
WorkPtr post_chunked(std::optional<ChunkedWork::Side> in, std::optional<ChunkedWork::Side> out, std::size_t chunk_bytes,
                     std::shared_ptr<const StagedBackend::DeviceStreams> streams,
                     std::function<WorkPtr(const Tensor& in, const Tensor& out)> start) {
  auto work = std::make_shared<ChunkedWork>(
      std::move(in), std::move(out), chunk_bytes, ChunkedWork::End::Exact, std::move(streams),
      [start = std::move(start)](const Tensor& in_chunk, const Tensor& out_chunk, int) {
        return start(in_chunk, out_chunk);
      },
      -1);
  work->post(0, work->count());
  return work;
}

}  // namespace

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
    std::optional<ChunkedWork::Side> side = ChunkedWork::staged(tensor.byte_view());
    auto work = std::make_shared<ChunkedWork>(
        sending ? side : std::nullopt, sending ? std::nullopt : side, options_.chunk_bytes, ChunkedWork::End::Exact,
        streams_for(tensor),
        [this, root, sending](const Tensor& in, const Tensor& out, int) {
          return host_.broadcast(sending ? in : out, root);
        },
        root);
    work->post(0, work->count());
    return work;
  }
  Staging staging;
  const Tensor host = rank() == root ? staging.in(tensor) : staging.out(tensor);
  return staging.after(host_.broadcast(host, root));
}

WorkPtr StagedBackend::all_reduce(const Tensor& tensor, ReduceOp op) {
  if (chunked(tensor)) {
    // Reductions are element-wise: each chunk of whole elements reduces on its own, in place.
    const ChunkedWork::Side side = ChunkedWork::staged(flat(tensor));
    auto work = std::make_shared<ChunkedWork>(
        side, side, options_.chunk_bytes, ChunkedWork::End::Exact, streams_for(tensor),
        [this, op](const Tensor& in, const Tensor&, int) { return host_.all_reduce(in, op); }, -1);
    work->post(0, work->count());
    return work;
  }
  Staging staging;
  const Tensor host = staging.in_out(tensor);
  return staging.after(host_.all_reduce(host, op));
}

WorkPtr StagedBackend::reduce(const Tensor& tensor, int root, ReduceOp op) {
  if (chunked(tensor)) {
    const ChunkedWork::Side side = ChunkedWork::staged(flat(tensor));
    const bool is_root = rank() == root;
    auto work = std::make_shared<ChunkedWork>(
        side, is_root ? std::optional(side) : std::nullopt, options_.chunk_bytes, ChunkedWork::End::Exact,
        streams_for(tensor),
        [this, root, op](const Tensor& in, const Tensor&, int) { return host_.reduce(in, root, op); }, root);
    work->post(0, work->count());
    return work;
  }
  Staging staging;
  const Tensor host = rank() == root ? staging.in_out(tensor) : staging.in(tensor);
  return staging.after(host_.reduce(host, root, op));
}

bool StagedBackend::chunked_pieces(const Tensor& piece) const {
  return piece.defined() && piece.nbytes() > options_.chunk_bytes;
}

// all_gather, and gather at its root: every rank's piece of `input` lands in its row of `output`,
// a chunk of every piece at a time.
WorkPtr StagedBackend::gather_in_chunks(std::string_view op, const Tensor& output, const Tensor& input,
                                        std::function<WorkPtr(const Tensor& in, const Tensor& out)> host_call) {
  check_pieces(op, output, "output", input, "input", size());
  const ContiguousOutput gathered(output);
  return gathered.after(post_chunked(ChunkedWork::staged(input.contiguous().byte_view()),
                                     ChunkedWork::staged(gathered.tensor().byte_view(), size()), options_.chunk_bytes,
                                     streams_for(input), std::move(host_call)));
}

WorkPtr StagedBackend::all_gather(const Tensor& output, const Tensor& input) {
  if (chunked_pieces(input)) {
    return gather_in_chunks("all_gather", output, input,
                            [this](const Tensor& in, const Tensor& out) { return host_.all_gather(out, in); });
  }
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = staging.out(output);
  return staging.after(host_.all_gather(host_output, host_input));
}

WorkPtr StagedBackend::gather(const Tensor& output, const Tensor& input, int root) {
  if (chunked_pieces(input)) {
    const bool is_root = rank() == root;
    if (!is_root) {
      return post_chunked(
          ChunkedWork::staged(input.contiguous().byte_view()),
          std::nullopt,
          options_.chunk_bytes, streams_for(input),
          [this, root](const Tensor& in, const Tensor&) { return host_.gather(Tensor(), in, root); });
    }
    return gather_in_chunks("gather", output, input,
                            [this, root](const Tensor& in, const Tensor& out) { return host_.gather(out, in, root); });
  }
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = rank() == root ? staging.out(output) : Tensor();
  return staging.after(host_.gather(host_output, host_input, root));
}

WorkPtr StagedBackend::scatter(const Tensor& output, const Tensor& input, int root) {
  if (chunked_pieces(output)) {
    const bool is_root = rank() == root;
    if (is_root) check_pieces("scatter", input, "input", output, "output", size());
    const ContiguousOutput piece(output);
    std::optional<ChunkedWork::Side> all;
    if (is_root) all = ChunkedWork::staged(input.contiguous().byte_view(), size());
    return piece.after(post_chunked(
        std::move(all),
        ChunkedWork::staged(piece.tensor().byte_view()),
        options_.chunk_bytes, streams_for(output),
        [this, root](const Tensor& in, const Tensor& out) { return host_.scatter(out, in, root); }));
  }
  Staging staging;
  const Tensor host_input = rank() == root ? staging.in(input) : Tensor();
  const Tensor host_output = staging.out(output);
  return staging.after(host_.scatter(host_output, host_input, root));
}

WorkPtr StagedBackend::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  if (chunked_pieces(output)) {
    check_pieces("reduce_scatter", input, "input", output, "output", size());
    // Element-wise like all_reduce: each chunk of whole elements of every rank's block reduces on
    // its own.
    const ContiguousOutput piece(output);
    return piece.after(post_chunked(
        ChunkedWork::staged(flat(input.contiguous()), size()),
        ChunkedWork::staged(flat(piece.tensor())),
        options_.chunk_bytes, streams_for(output),
        [this, op](const Tensor& in, const Tensor& out) { return host_.reduce_scatter(out, in, op); }));
  }
  Staging staging;
  const Tensor host_input = staging.in(input);
  const Tensor host_output = staging.out(output);
  return staging.after(host_.reduce_scatter(host_output, host_input, op));
}

// Whole: its blocks differ in length from rank to rank, so no rank could know how many chunks
// another cuts (all_to_all is also one exchange with every peer, not a pipeline of one buffer).
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
        ChunkedWork::staged(tensor.byte_view()), std::nullopt, options_.chunk_bytes, ChunkedWork::End::Short,
        streams_for(tensor),
        [this, tag](const Tensor& in, const Tensor&, int peer) { return host_.send(in, peer, tag); }, dst);
    work->post(0, work->count());
    return work;
  }
  Staging staging;
  return staging.after(host_.send(staging.in(tensor), dst, tag));
}

WorkPtr StagedBackend::chunked_recv(const Tensor& tensor, int src, int tag) {
  auto work = std::make_shared<ChunkedWork>(
      std::nullopt, ChunkedWork::staged(tensor.byte_view()), options_.chunk_bytes, ChunkedWork::End::Short,
      streams_for(tensor),
      [this, tag](const Tensor&, const Tensor& out, int peer) { return host_.recv(out, peer, tag); }, src);
  if (src != kAnySource) {
    work->post(0, work->count());
    return work;
  }
  work->receive_from_any_source();
  work->post(0, 1);
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

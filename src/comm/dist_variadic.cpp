// Variadic shapes: each rank's tensor may differ in ndim, shape and dtype, and the receivers know
// none of it. One small round moves a fixed-size header per tensor (device kind, dtype, ndim, dims)
// over the CPU collectives; one data round then moves the bytes into a single allocation, viewed per
// sender, as point-to-point transfers posted together.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "comm/dist_internal.hpp"
#include "comm/peer_claims.hpp"
#include "core/checked_math.hpp"
#include "core/text_format.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/error.hpp"

namespace tensortree::dist {

namespace detail {

namespace {

enum HeaderWord : std::size_t { kDeviceWord = 0, kDTypeWord = 1, kNdimWord = 2, kFirstDimWord = 3 };

[[noreturn]] void corrupt_header(int sender, const std::string& what) {
  throw CorruptData(fmt::format("shape header from rank {}: {}", sender, what));
}

// Each block of allocate_blocks starts at a multiple of kByteAlignment, so every dtype's view is aligned.
std::size_t aligned(std::size_t bytes) {
  const std::optional<std::uint64_t> padded = tensortree::detail::checked_align_up(bytes);
  if (!padded) throw InvalidArgument(fmt::format("a block of {} bytes cannot be aligned", bytes));
  return static_cast<std::size_t>(*padded);
}

}  // namespace

TensorHeader TensorHeader::of(const Tensor& tensor) { return {tensor.device().type(), tensor.dtype(), tensor.shape()}; }

std::size_t TensorHeader::nbytes() const { return static_cast<std::size_t>(numel_of(shape)) * itemsize(dtype); }

HeaderWords encode_header(const TensorHeader& header, std::string_view op) {
  if (header.shape.size() > kMaxHeaderDims) {
    throw InvalidArgument(fmt::format("{}: a tensor of {} dimensions; variadic shapes carry at most {}", op,
                                      header.shape.size(), kMaxHeaderDims));
  }
  HeaderWords words{};
  words[kDeviceWord] = static_cast<std::int64_t>(header.device_type);
  words[kDTypeWord] = static_cast<std::int64_t>(header.dtype);
  words[kNdimWord] = static_cast<std::int64_t>(header.shape.size());
  std::copy(header.shape.begin(), header.shape.end(), words.begin() + kFirstDimWord);
  return words;
}

TensorHeader decode_header(std::span<const std::int64_t> words, int sender) {
  const std::int64_t device = words[kDeviceWord];
  const std::int64_t dtype = words[kDTypeWord];
  const std::int64_t ndim = words[kNdimWord];
  if (device != static_cast<std::int64_t>(DeviceType::CPU) && device != static_cast<std::int64_t>(DeviceType::CUDA)) {
    corrupt_header(sender, fmt::format("device kind {} is neither cpu nor cuda", device));
  }
  if (dtype < 0 || dtype > 255 || !is_valid_dtype(static_cast<std::uint8_t>(dtype))) {
    corrupt_header(sender, fmt::format("dtype {} is not a dtype", dtype));
  }
  if (ndim < 0 || ndim > static_cast<std::int64_t>(kMaxHeaderDims)) {
    corrupt_header(sender, fmt::format("{} dimensions, outside 0..{}", ndim, kMaxHeaderDims));
  }
  TensorHeader header{static_cast<DeviceType>(device), static_cast<DType>(dtype),
                      Shape(words.begin() + kFirstDimWord, words.begin() + kFirstDimWord + ndim)};
  if (!tensortree::detail::checked_nbytes(header.shape, itemsize(header.dtype))) {
    corrupt_header(sender, fmt::format("shape {} is negative or too large", shape_str(header.shape)));
  }
  return header;
}

Device device_of_kind(DeviceType type) { return type == DeviceType::CPU ? Device::cpu() : Device::cuda(); }

std::vector<Tensor> allocate_blocks(std::span<const TensorHeader> headers, Device device) {
  std::vector<std::size_t> offsets;
  std::size_t total = 0;
  for (const TensorHeader& header : headers) {
    offsets.push_back(total);
    const std::optional<std::size_t> next = tensortree::detail::checked_add(total, aligned(header.nbytes()));
    if (!next) {
      throw CorruptData(fmt::format("variadic shapes: {} blocks whose sizes overflow 64 bits together; nothing was "
                                    "allocated", headers.size()));
    }
    total = *next;
  }
  const StoragePtr storage = Storage::allocate(total, device);
  std::vector<Tensor> blocks;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    blocks.emplace_back(storage, offsets[i], headers[i].dtype, headers[i].shape, contiguous_strides(headers[i].shape));
  }
  return blocks;
}

}  // namespace detail

namespace {

using namespace detail;

// Every rank learns every rank's header, so every rank can reject a mismatch (a peer's tensor on
// another kind of device) together, before any data moves.
std::vector<TensorHeader> all_gather_headers(const Tensor& tensor, const Group& group, std::string_view op) {
  const HeaderWords mine = encode_header(TensorHeader::of(tensor), op);
  const Tensor received = Tensor::empty({group.size(), static_cast<std::int64_t>(kHeaderWords)}, {DType::Int64});
  metadata_collectives(group).all_gather(received, int64_tensor(mine))->wait();
  const std::vector<std::int64_t> words = int64_values(received);
  std::vector<TensorHeader> headers;
  for (int r = 0; r < group.size(); ++r) {
    headers.push_back(
        decode_header(std::span(words).subspan(static_cast<std::size_t>(r) * kHeaderWords, kHeaderWords), r));
  }
  return headers;
}

// inputs[r]'s header goes to rank r; returns the header each rank sent here.
std::vector<TensorHeader> all_to_all_headers(std::span<const Tensor> inputs, const Group& group, std::string_view op) {
  std::vector<std::int64_t> outgoing;
  for (const Tensor& input : inputs) {
    const HeaderWords words = encode_header(TensorHeader::of(input), op);
    outgoing.insert(outgoing.end(), words.begin(), words.end());
  }
  const auto n = static_cast<std::size_t>(group.size());
  const Tensor received = Tensor::empty({static_cast<std::int64_t>(n * kHeaderWords)}, {DType::Int64});
  const std::vector<std::int64_t> counts(n, static_cast<std::int64_t>(kHeaderWords));
  metadata_collectives(group).all_to_all(received, int64_tensor(outgoing), counts, counts)->wait();
  const std::vector<std::int64_t> words = int64_values(received);
  std::vector<TensorHeader> headers;
  for (std::size_t r = 0; r < n; ++r) {
    headers.push_back(decode_header(std::span(words).subspan(r * kHeaderWords, kHeaderWords), static_cast<int>(r)));
  }
  return headers;
}

// Before allocate_blocks: every block a peer claims (headers[r] came from rank r) within the group's
// limit, and their aligned sum within 64 bits. Collectives whose ranks all see every header run it
// on every rank, so that all of them refuse together and none is left waiting.
void check_block_claims(std::span<const TensorHeader> headers, const Group& group, std::string_view op) {
  std::uint64_t total = 0;
  for (std::size_t r = 0; r < headers.size(); ++r) {
    const int sender = static_cast<int>(r);
    const std::string what = fmt::format("{}: the tensor", op);
    // decode_header has checked that numel × itemsize fits an int64.
    const std::uint64_t bytes = headers[r].nbytes();
    tensortree::detail::check_peer_claim(group, sender, bytes, what);
    const std::optional<std::uint64_t> padded = tensortree::detail::checked_align_up(bytes);
    if (!padded) tensortree::detail::peer_claim_sum(sender, {bytes, tensortree::detail::kByteAlignment}, what);
    total = tensortree::detail::peer_claim_sum(sender, {total, *padded}, fmt::format("{}s gathered so far", what));
  }
}

// Every tensor moves through one device's transports, so every rank's must be on the same kind of device.
void check_one_device_kind(std::span<const TensorHeader> headers, DeviceType mine, std::string_view op) {
  for (std::size_t r = 0; r < headers.size(); ++r) {
    if (headers[r].device_type != mine) {
      throw InvalidArgument(fmt::format("{}: rank {}'s tensor is on {}, this rank's on {}; every rank's must be on "
                                        "one kind of device", op, r, device_of_kind(headers[r].device_type),
                                        device_of_kind(mine)));
    }
  }
}

void check_inputs(std::span<const Tensor> inputs, const Group& group, std::string_view op) {
  if (static_cast<int>(inputs.size()) != group.size()) {
    throw InvalidArgument(fmt::format("{}: inputs holds {} tensors; the group has {} ranks and needs one per rank", op,
                                      inputs.size(), group.size()));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string item = fmt::format("inputs[{}]", i);
    check_defined(inputs[i], item, op);
    if (inputs[i].device() != inputs[0].device()) {
      throw InvalidArgument(fmt::format("{}: {} is on {} but inputs[0] on {}", op, item, inputs[i].device(),
                                        inputs[0].device()));
    }
  }
}

}  // namespace

Pending<std::vector<Tensor>> all_gather_variadic_shape_async(const Tensor& tensor, const Group& group) {
  constexpr std::string_view op = "all_gather_variadic_shape";
  check_member(group, op);
  check_defined(tensor, "tensor", op);
  const std::vector<TensorHeader> headers = all_gather_headers(tensor, group, op);
  check_one_device_kind(headers, tensor.device().type(), op);
  check_block_claims(headers, group, op);
  std::vector<Tensor> outputs = allocate_blocks(headers, tensor.device());
  const Tensor packed = tensor.contiguous();
  const int me = group.rank();
  outputs[static_cast<std::size_t>(me)].copy_(packed);
  ByteExchange exchange;
  for (int peer = 0; peer < group.size(); ++peer) {
    if (peer == me) continue;
    exchange.send(packed, peer);
    exchange.recv(outputs[static_cast<std::size_t>(peer)], peer);
  }
  return {exchange.post(group), std::move(outputs)};
}

std::vector<Tensor> all_gather_variadic_shape(const Tensor& tensor, const Group& group) {
  auto pending = all_gather_variadic_shape_async(tensor, group);
  return std::move(pending.get());
}

Pending<std::vector<Tensor>> gather_variadic_shape_async(const Tensor& tensor, int root, const Group& group) {
  constexpr std::string_view op = "gather_variadic_shape";
  check_member(group, op);
  check_rank(root, "dst", group, op);
  check_defined(tensor, "tensor", op);
  const std::vector<TensorHeader> headers = all_gather_headers(tensor, group, op);
  check_one_device_kind(headers, tensor.device().type(), op);
  // Every rank sees every header: all refuse what the root would, and no sender is left waiting.
  check_block_claims(headers, group, op);
  const Tensor packed = tensor.contiguous();
  ByteExchange exchange;
  if (group.rank() != root) {
    exchange.send(packed, root);
    return {exchange.post(group), {}};
  }
  std::vector<Tensor> outputs = allocate_blocks(headers, tensor.device());
  outputs[static_cast<std::size_t>(root)].copy_(packed);
  for (int peer = 0; peer < group.size(); ++peer) {
    if (peer != root) exchange.recv(outputs[static_cast<std::size_t>(peer)], peer);
  }
  return {exchange.post(group), std::move(outputs)};
}

std::vector<Tensor> gather_variadic_shape(const Tensor& tensor, int root, const Group& group) {
  auto pending = gather_variadic_shape_async(tensor, root, group);
  return std::move(pending.get());
}

Pending<std::vector<Tensor>> all_to_all_variadic_shape_async(std::span<const Tensor> inputs, const Group& group) {
  constexpr std::string_view op = "all_to_all_variadic_shape";
  check_member(group, op);
  check_inputs(inputs, group, op);
  const std::vector<TensorHeader> headers = all_to_all_headers(inputs, group, op);
  const Device device = inputs[0].device();
  check_one_device_kind(headers, device.type(), op);
  check_block_claims(headers, group, op);
  std::vector<Tensor> outputs = allocate_blocks(headers, device);
  const int me = group.rank();
  outputs[static_cast<std::size_t>(me)].copy_(inputs[static_cast<std::size_t>(me)]);
  ByteExchange exchange;
  for (int peer = 0; peer < group.size(); ++peer) {
    if (peer == me) continue;
    exchange.send(inputs[static_cast<std::size_t>(peer)].contiguous(), peer);
    exchange.recv(outputs[static_cast<std::size_t>(peer)], peer);
  }
  return {exchange.post(group), std::move(outputs)};
}

std::vector<Tensor> all_to_all_variadic_shape(std::span<const Tensor> inputs, const Group& group) {
  auto pending = all_to_all_variadic_shape_async(inputs, group);
  return std::move(pending.get());
}

}  // namespace tensortree::dist

#include "comm/p2p_check.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "comm/dist_internal.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::dist::detail {

namespace {

// The header's words: a magic number, the sender, the dtype, the rank (number of dimensions), the
// bytes, and the first kDims sizes (a tensor of more dimensions is compared on these and its bytes).
constexpr std::int64_t kMagic = 0x5454'5032'5044'4247;  // "TTP2PDBG"
constexpr std::size_t kDims = 11;
enum Word : std::size_t { kMagicWord, kSender, kDType, kRank, kBytes, kFirstDim, kWords = kFirstDim + kDims };

std::array<std::int64_t, kWords> words_of(const Tensor& tensor, int sender) {
  std::array<std::int64_t, kWords> words{};
  words[kMagicWord] = kMagic;
  words[kSender] = sender;
  words[kDType] = static_cast<std::int64_t>(tensor.dtype());
  words[kRank] = static_cast<std::int64_t>(tensor.dim());
  words[kBytes] = static_cast<std::int64_t>(tensor.nbytes());
  for (std::size_t d = 0; d < kDims && d < tensor.shape().size(); ++d) words[kFirstDim + d] = tensor.shape()[d];
  return words;
}

std::vector<std::int64_t> host_words(const Tensor& header) {
  return int64_values(header.device().is_cpu() ? header : header.to(Device::cpu()));
}

// "float32 [2, 3]" for the words of a header.
std::string describe(std::span<const std::int64_t> words) {
  const std::int64_t raw = words[kDType];
  const std::string dtype = raw >= 0 && raw <= 255 && is_valid_dtype(static_cast<std::uint8_t>(raw))
                                ? std::string(dtype_name(static_cast<DType>(raw)))
                                : fmt::format("dtype #{}", raw);
  const auto rank = static_cast<std::size_t>(std::max<std::int64_t>(words[kRank], 0));
  std::vector<std::int64_t> dims(words.begin() + kFirstDim, words.begin() + kFirstDim + std::min(rank, kDims));
  return fmt::format("{} [{}{}]", dtype, fmt::join(dims, ", "), rank > kDims ? ", ..." : "");
}

}  // namespace

Tensor p2p_header(const Tensor& tensor, int sender) {
  const Tensor host = int64_tensor(words_of(tensor, sender));
  return tensor.device().is_cpu() ? host : host.to(tensor.device());
}

Tensor p2p_header_buffer(const Tensor& tensor) {
  // Zeros: a header that never arrived reads as garbled, not as whatever the memory held.
  return Tensor::zeros({static_cast<std::int64_t>(kWords)}, {DType::Int64, tensor.device()});
}

int p2p_header_sender(const Tensor& header) {
  const std::vector<std::int64_t> words = host_words(header);
  return words[kMagicWord] == kMagic ? static_cast<int>(words[kSender]) : -1;
}

bool p2p_header_bytes_match(const Tensor& header, const Tensor& tensor) {
  return host_words(header)[kBytes] == static_cast<std::int64_t>(tensor.nbytes());
}

void check_p2p_header(const Tensor& header, const Tensor& tensor, const Group& group, std::string_view op) {
  const std::vector<std::int64_t> received = host_words(header);
  if (received[kMagicWord] != kMagic) {
    throw InvalidArgument(fmt::format("{} on rank {} (TENSORTREE_DISTRIBUTED_DEBUG=DETAIL): the message before the "
                                      "data is not a debug-mode header; does every rank of the group run in debug "
                                      "mode?", op, group.rank()));
  }
  const std::array<std::int64_t, kWords> expected = words_of(tensor, static_cast<int>(received[kSender]));
  if (std::equal(expected.begin(), expected.end(), received.begin())) return;
  throw InvalidArgument(fmt::format("{} on rank {} (TENSORTREE_DISTRIBUTED_DEBUG=DETAIL): rank {} sent {} ({} bytes) "
                                    "but this rank receives into {} ({} bytes); the received tensor's values are "
                                    "not to be used",
                                    op, group.rank(), received[kSender], describe(received), received[kBytes],
                                    describe(expected), expected[kBytes]));
}

}  // namespace tensortree::dist::detail

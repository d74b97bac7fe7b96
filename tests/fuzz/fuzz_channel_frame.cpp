// The frame header of every message on a tree channel: an authenticated peer still controls
// every byte of it (and the hostile-actor tests send such bytes on purpose).
#include "channel/channel_frame.hpp"
#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return fuzz::expect_typed_errors([&] {
    const tensortree::detail::Frame frame = tensortree::detail::decode_frame(fuzz::bytes_of(data, size), "a peer");
    // A header that decodes must be what encoding it produces, byte for byte.
    const tensortree::detail::EncodedFrame encoded = tensortree::detail::encode_frame(frame);
    const auto again = encoded.span();
    if (size != again.size()) __builtin_trap();
    for (std::size_t i = 0; i < size; ++i) {
      if (again[i] != static_cast<std::byte>(data[i])) __builtin_trap();
    }
  });
}

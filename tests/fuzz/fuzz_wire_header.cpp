// The 64-byte header behind every tree message: a peer controls every byte of it.
#include "fuzz_target.hpp"
#include "tensortree/transfer.hpp"
#include "wire/wire_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < tensortree::kWireHeaderBytes) return 0;
  return fuzz::expect_typed_errors([&] {
    const auto* at = reinterpret_cast<const std::byte*>(data);
    const tensortree::detail::WireHeader header =
        tensortree::detail::read_wire_header(at, tensortree::Device::cpu(), "rank 1", "recv");
    // A header that reads back must be what writing it produces, byte for byte.
    std::byte again[tensortree::kWireHeaderBytes];
    tensortree::detail::write_wire_header(header, again, tensortree::Device::cpu());
    for (std::size_t i = 0; i < tensortree::kWireHeaderBytes; ++i) {
      if (again[i] != at[i]) __builtin_trap();
    }
  });
}

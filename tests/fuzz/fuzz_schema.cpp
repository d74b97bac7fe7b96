// Schema envelopes from a peer or a file: decode, and a decoded schema must describe a buffer that
// consolidation can use (a tree built over it re-encodes to the same bytes).
#include <memory>
#include <vector>

#include "fuzz_target.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tree.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return fuzz::expect_typed_errors([&] {
    const tensortree::Schema schema = tensortree::Schema::decode(fuzz::bytes_of(data, size));
    const std::vector<std::byte> again = schema.encode();
    if (tensortree::Schema::decode(again) != schema) __builtin_trap();  // decode(encode(s)) must be s
    // Small layouts only: a valid schema may describe terabytes, which is not this target's subject.
    if (schema.total_bytes() <= (std::uint64_t{1} << 20) && schema.storage_device() == tensortree::DeviceType::CPU) {
      auto storage = tensortree::Storage::allocate(schema.total_bytes(), tensortree::Device::cpu());
      auto shared = std::make_shared<const tensortree::Schema>(schema);
      const tensortree::TensorTree tree = tensortree::TensorTree::from_consolidated(storage, shared);
      if (tree.consolidate().schema()->fingerprint() != schema.fingerprint()) __builtin_trap();
    }
  });
}

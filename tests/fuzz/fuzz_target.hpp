// What every fuzz target shares: the libFuzzer entry point's signature, and the rule that decoding
// hostile bytes may only end in one of the library's typed errors. Anything else (another exception,
// a crash, a sanitizer report, a hang) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tensortree/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fuzz {

inline std::span<const std::byte> bytes_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

// Runs `decode`; a tensortree::Error is the expected answer to bad bytes and is swallowed.
template <class Decode>
int expect_typed_errors(Decode&& decode) {
  try {
    decode();
  } catch (const tensortree::Error&) {
  }
  return 0;
}

}  // namespace fuzz

// A value type for the object fuzz target and its seeds: primitives with invalid representations
// (bool, enums) and the containers that load them one at a time (vector<bool>) or as one block
// (std::array<bool, N>).
#pragma once

#include <boost/serialization/array.hpp>
#include <boost/serialization/vector.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace fuzz {

enum class Phase : std::uint8_t { Collect, Learn, Evaluate };

struct Flags {
  bool done = false;
  Phase phase = Phase::Collect;
  std::array<bool, 3> truncated{};
  std::vector<bool> mask;

  template <class Archive>
  void serialize(Archive& archive, unsigned /*version*/) {
    archive & done & phase & truncated & mask;
  }
};

}  // namespace fuzz

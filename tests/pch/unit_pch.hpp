// Precompiled once for each single-process test program (tests/meson.build) and read by every file
// of it: Catch2 and the library's public headers, some 4.5 s to parse in each file otherwise. Every
// file still includes what it uses.
#include <catch2/catch.hpp>

#include "tensortree/tensortree.hpp"

// Precompiled once for each test program of several files (the single-process ones, dist_tests,
// unit_tree_channel) and read by every file of it: Catch2 and the library's public headers, some
// 4.5 s to parse in each file otherwise. Every file still includes what it uses.
#include <catch2/catch.hpp>

#include "tensortree/tensortree.hpp"

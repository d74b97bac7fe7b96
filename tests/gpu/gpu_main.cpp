// Catch2 main for GPU tests: exit status 77 (Meson's "skipped") when no CUDA device is usable,
// so machines without a GPU, and builds without CUDA, list these tests as SKIP.
#include <iostream>

#include "catch_session.hpp"
#include "tensortree/device.hpp"

int main(int argc, char* argv[]) {
  constexpr int kSkipped = 77;
  if (tensortree::cuda_device_count() == 0) {
    std::cout << "GPU tests skipped: no CUDA device found (" << tensortree::build_features() << ")\n";
    return kSkipped;
  }
  return tensortree::test::run_catch_session(argc, argv);
}

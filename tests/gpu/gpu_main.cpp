// Catch2 main for GPU tests: exit status 77 (Meson's "skipped") when no CUDA device is usable,
// so machines without a GPU, and builds without CUDA, list these tests as SKIP.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>

#include "tensortree/device.hpp"

int main(int argc, char* argv[]) {
  constexpr int kSkipped = 77;
  if (tensortree::cuda_device_count() == 0) {
    std::cout << "GPU tests skipped: no CUDA device found (" << tensortree::build_features() << ")\n";
    return kSkipped;
  }
  return Catch::Session().run(argc, argv);
}

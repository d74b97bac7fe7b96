// A program outside the source tree, compiled with nothing but `pkg-config --cflags --libs tensortree`
// (or CMake's find_package(TensorTree), CMakeLists.txt beside it):
// proves that the installed headers, the generated config header and the shared library suffice,
// also for dist_objects.hpp, whose templates serialize in this program with Boost.Serialization.
#include <tensortree/dist_objects.hpp>
#include <tensortree/tensortree.hpp>

#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace {

// A transposed copy exercises the strided copy inside the installed library.
bool transposed_copy_is_right(const tensortree::Tensor& original, const tensortree::Tensor& transposed) {
  for (std::int64_t row = 0; row < original.size(0); ++row) {
    for (std::int64_t col = 0; col < original.size(1); ++col) {
      const std::int64_t expected = 1 + row * original.size(1) + col;
      if (original.at<std::int64_t>({row, col}) != expected ||
          transposed.at<std::int64_t>({col, row}) != expected) {
        std::cerr << "consumer: element (" << row << ", " << col << ") is wrong, expected " << expected
                  << '\n';
        return false;
      }
    }
  }
  return true;
}

// Instantiates an object collective, whose serialization links Boost.Serialization through the same
// pkg-config line. A Group no context made refuses it (no MPI needed here).
bool object_collective_links() {
  std::vector<std::string> names{"obs", "reward"};
  try {
    tensortree::dist::broadcast_object(names, 0, tensortree::Group());
  } catch (const tensortree::InvalidArgument&) {
    return true;
  }
  std::cerr << "consumer: broadcast_object on an empty Group did not throw InvalidArgument\n";
  return false;
}

}  // namespace

int main() {
  using tensortree::DType;
  using tensortree::Tensor;
  try {
    const Tensor original = Tensor::arange({3, 4}, 1.0, 1.0, {.dtype = DType::Int64});
    const Tensor transposed = original.transpose(0, 1).contiguous();
    if (!transposed.is_contiguous() || !transposed_copy_is_right(original, transposed)) return 1;
    if (!object_collective_links()) return 1;
    std::cout << "consumer: tensortree " << TT_VERSION << " (" << tensortree::build_features() << ")\n"
              << "consumer: " << transposed << '\n';
    return 0;
  } catch (const tensortree::Error& error) {
    std::cerr << "consumer: " << error.what() << '\n';
    return 1;
  }
}

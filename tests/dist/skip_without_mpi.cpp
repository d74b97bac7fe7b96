// Stands in for the distributed tests when the library is built without MPI: Meson reads exit
// status 77 as "skipped", so the tests stay registered and visible.
#include <iostream>

int main() {
  std::cout << "distributed tests skipped: tensortree was built without MPI (or mpiexec is missing)\n";
  return 77;
}

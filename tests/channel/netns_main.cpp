// Catch2 main for the tests that put actors on "another node" (a network namespace): exit status
// 77 (Meson's "skipped") where this process cannot make network namespaces (not root, or a
// container without CAP_SYS_ADMIN).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "catch_session.hpp"

int main(int argc, char* argv[]) {
  constexpr int kSkipped = 77;
  const std::string probe = "tt_probe_" + std::to_string(::getpid());
  if (::geteuid() != 0 || std::system(("ip netns add " + probe + " 2>/dev/null").c_str()) != 0) {
    std::cout << "network namespace tests skipped: this process cannot make network namespaces (needs root and ip)\n";
    return kSkipped;
  }
  std::system(("ip netns del " + probe).c_str());
  return tensortree::test::run_catch_session(argc, argv);
}

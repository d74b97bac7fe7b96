// Catch2's implementation, compiled once per build for every test program. In a sanitized build it
// is left uninstrumented (tests/meson.build): the framework is not under test, and instrumented it
// took longer to compile than any file of the library.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

namespace tensortree::test {

int run_catch_session(int argc, char* argv[], CatchColour colour) {
  Catch::Session session;
  if (colour == CatchColour::No) session.configData().useColour = Catch::UseColour::No;
  if (const int status = session.applyCommandLine(argc, argv); status != 0) return status;
  return session.run();
}

}  // namespace tensortree::test

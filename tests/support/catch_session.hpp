// Catch2's session for the test programs' own mains. Catch2 declares its Session only where its
// implementation is compiled, which is catch_session.cpp alone (once per build).
#pragma once

namespace tensortree::test {

// Where Catch may colour its output: not where several ranks write through one pty, since escape
// codes spanning lines garble each rank's line prefix.
enum class CatchColour { Auto, No };

// Runs the test cases the command line selects. Returns the number of failed test cases (capped
// at 255), or non-zero for a bad command line.
int run_catch_session(int argc, char* argv[], CatchColour colour = CatchColour::Auto);

}  // namespace tensortree::test

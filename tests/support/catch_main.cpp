// The main of the single-process test programs.
#include "catch_session.hpp"

int main(int argc, char* argv[]) { return tensortree::test::run_catch_session(argc, argv); }

#include "output.hpp"

#include <cstdarg>
#include <cstdio>

#include "mpi_program.hpp"

namespace actor_learner {

std::string format(const char* pattern, ...) {
  char text[1024];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(text, sizeof text, pattern, args);
  va_end(args);
  return text;
}

void say(const std::string& line) {
  const std::string text = line + '\n';
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

void complain(const std::string& line) { mpi_program::complain(line); }

}  // namespace actor_learner

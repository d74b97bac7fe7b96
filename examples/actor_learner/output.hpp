// The job's output: one write per line, flushed, so that the ranks' lines never interleave mid-line.
#pragma once

#include <string>

namespace actor_learner {

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
std::string format(const char* pattern, ...);

void say(const std::string& line);       // stdout
void complain(const std::string& line);  // stderr

}  // namespace actor_learner

// The launcher's child processes: started with posix_spawn, polled without blocking, waited for
// with a deadline (then SIGKILLed), and described for the report.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace shared_job {

struct Child {
  std::string label;  // "learner", "actor N", "remote actor N"
  pid_t pid = 0;
  int status = 0;     // waitpid's, once exited
  bool exited = false;
  bool killed_on_purpose = false;
};

// Starts `command` (a program, found on PATH unless a path, and its arguments) with `env`
// ("NAME=value") ahead of this process's environment.
pid_t spawn(const std::vector<std::string>& command, const std::vector<std::string>& env = {});

// True once `child` has exited (reaped).
bool poll(Child& child);
// Waits until `child` exits or `deadline` passes; then SIGKILLs it. True when it exited by itself.
bool wait_until(Child& child, std::chrono::steady_clock::time_point deadline);
// SIGKILLs `child` and reaps it.
void kill_now(Child& child);

bool succeeded(const Child& child);
std::string describe(const Child& child);  // "exit 0", "signal 9"

}  // namespace shared_job

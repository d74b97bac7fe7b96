#include "child.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace shared_job {

namespace {

// argv or envp for posix_spawn: pointers into `strings`, null-terminated.
std::vector<char*> pointers(std::vector<std::string>& strings, char** more = nullptr) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  for (; more != nullptr && *more != nullptr; ++more) out.push_back(*more);
  out.push_back(nullptr);
  return out;
}

}  // namespace

pid_t spawn(const std::vector<std::string>& command, const std::vector<std::string>& env) {
  std::vector<std::string> args = command;
  std::vector<std::string> vars = env;
  // The variables given come first: getenv takes the first of a name.
  const std::vector<char*> argv = pointers(args);
  const std::vector<char*> envp = pointers(vars, environ);
  pid_t pid = 0;
  if (const int error = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()); error != 0) {
    throw std::runtime_error("posix_spawn of " + command.front() + " failed: error " + std::to_string(error));
  }
  return pid;
}

bool poll(Child& child) {
  if (!child.exited && ::waitpid(child.pid, &child.status, WNOHANG) == child.pid) child.exited = true;
  return child.exited;
}

bool wait_until(Child& child, std::chrono::steady_clock::time_point deadline) {
  while (!poll(child)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "[launcher] %s (pid %d) did not finish in time: killing it\n", child.label.c_str(),
                   child.pid);
      kill_now(child);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void kill_now(Child& child) {
  ::kill(child.pid, SIGKILL);
  ::waitpid(child.pid, &child.status, 0);
  child.exited = true;
}

bool succeeded(const Child& child) { return WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0; }

std::string describe(const Child& child) {
  if (WIFEXITED(child.status)) return "exit " + std::to_string(WEXITSTATUS(child.status));
  if (WIFSIGNALED(child.status)) return "signal " + std::to_string(WTERMSIG(child.status));
  return "status " + std::to_string(child.status);
}

}  // namespace shared_job

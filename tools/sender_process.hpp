// The sending end of a benchmark as a process of its own (so that it has UCX to itself, as a peer
// on another host has), started with fork and exec and paced through its standard input: one byte
// per round of messages, then end of file. Killed if still running when the object goes.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include <stdexcept>

namespace tensortree::bench {

class SenderProcess {
 public:
  explicit SenderProcess(const std::vector<std::string>& command) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("bench_channel: pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("bench_channel: fork failed");
    if (pid_ == 0) exec_child(command, fds);
    ::close(fds[0]);
    go_ = fds[1];
  }
  ~SenderProcess() {
    stop();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  SenderProcess(const SenderProcess&) = delete;
  SenderProcess& operator=(const SenderProcess&) = delete;

  // Lets the sender start its next round.
  void go() {
    const char byte = 1;
    if (::write(go_, &byte, 1) != 1) throw std::runtime_error("bench_channel: the sender process is gone");
  }

  // Tells the sender there are no more rounds (it then closes its end of the transfer and exits).
  void stop() {
    if (go_ >= 0) ::close(std::exchange(go_, -1));
  }

  // Its exit status (128 + the signal when a signal ended it), once it has ended.
  int wait() {
    stop();
    int status = 0;
    const pid_t pid = std::exchange(pid_, -1);
    if (::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // In the sender: waits for the next round; false at end of file.
  static bool await_go() {
    char byte = 0;
    return ::read(STDIN_FILENO, &byte, 1) == 1;
  }

 private:
  [[noreturn]] static void exec_child(const std::vector<std::string>& command, const int fds[2]) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(fds[0], STDIN_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }

  pid_t pid_ = -1;
  int go_ = -1;
};

}  // namespace tensortree::bench

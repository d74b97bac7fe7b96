// Where bench_channel's sender runs, relative to its receiver (this process): "localhost" (a
// process on this host) or "namespaces" (a process in another network namespace, over a veth pair
// with UCX held to TCP: other_node.hpp). A placement starts the sender's command there, sets this
// side's UCX up for it, and runs the MPI column (bench_channel_mpi under mpirun) with rank 0 here
// and rank 1 there.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_channel_tree.hpp"
#include "other_node.hpp"

namespace tensortree::bench {

using tools::OtherNode;

// Sets environment variables for as long as it lives, then puts back what was there.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

class Placement {
 public:
  // The placement `name`; null, and `why` says why, where it cannot be made here.
  static std::unique_ptr<Placement> make(const std::string& name, std::string& why) {
    if (name == "localhost") return std::unique_ptr<Placement>(new Placement(nullptr));
    std::unique_ptr<OtherNode> node = OtherNode::make(why);
    return node ? std::unique_ptr<Placement>(new Placement(std::move(node))) : nullptr;
  }

  std::string name() const { return node_ ? "namespaces" : "localhost"; }

  // Where the receiver listens: the address the sender reaches it at.
  std::string bind_address() const { return (node_ ? node_->here_ip() : std::string("127.0.0.1")) + ":0"; }

  // This side's UCX, for a node made while the result lives: TCP over the veth, as the sender's.
  ScopedEnv ucx_here() const {
    if (!node_) return ScopedEnv({});
    return ScopedEnv({{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", node_->here_device()}});
  }

  std::vector<std::string> sender_command(const std::vector<std::string>& command) const {
    return node_ ? node_->inside(command) : command;
  }

  // bench_channel_mpi's seconds per message for `count` trees of `shape`, or nullopt where it was
  // not built (no MPI). Throws when it fails or prints no time.
  std::optional<double> mpi_seconds_per_message(TreeShape shape, int count, int rounds) const {
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
    const std::filesystem::path program = self.parent_path() / "bench_channel_mpi";
    if (!std::filesystem::exists(program)) return std::nullopt;
    const std::string command = fmt::format("{} -n 2 '{}' --tree {} --count {} --rounds {}", mpirun(self),
                                            program.string(), shape.text(), count, rounds);
    return seconds_printed_by(command);
  }

 private:
  explicit Placement(std::unique_ptr<OtherNode> node) : node_(std::move(node)) {}

  // mpirun as Open MPI comes (root allowed); for the namespaces, rank 1 on the other node, which
  // mpirun reaches through this program's --rsh-agent in place of ssh.
  std::string mpirun(const std::filesystem::path& self) const {
    const std::string base = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun";
    if (!node_) return base;
    return fmt::format("{} --mca plm_rsh_agent '{} --rsh-agent {}' --host localhost:1,{}:1", base, self.string(),
                       node_->name(), node_->there_ip());
  }

  static double seconds_printed_by(const std::string& command) {
    FILE* out = ::popen(command.c_str(), "r");
    check(out != nullptr, "could not run " + command);
    std::optional<double> seconds;
    char line[256];
    while (std::fgets(line, sizeof line, out)) {
      double value = 0;
      if (std::sscanf(line, "seconds_per_message %lf", &value) == 1) seconds = value;
    }
    const int status = ::pclose(out);
    check(status == 0 && seconds.has_value(), "the MPI column failed: " + command);
    return *seconds;
  }

  std::unique_ptr<OtherNode> node_;
};

// In place of ssh for mpirun (plm_rsh_agent): `bench_channel --rsh-agent NAMESPACE HOST WORDS...`
// runs WORDS (the command mpirun meant for HOST, which a shell reads) inside NAMESPACE.
inline int rsh_agent(int argc, char** argv) {
  if (argc < 3) return 2;
  std::string command;
  for (int i = 2; i < argc; ++i) command += std::string(i > 2 ? " " : "") + argv[i];
  ::execlp("ip", "ip", "netns", "exec", argv[0], "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
  return 127;
}

}  // namespace tensortree::bench

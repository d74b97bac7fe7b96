// "Another node" on this machine, for the remote actors: a network namespace joined to this one by
// a veth pair, with UCX held to TCP over that pair on both sides, as between two hosts. Made by the
// launcher (it needs root) and removed, with the veth pair, when the launcher lets go of it.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace shared_job {

// Where remote actors run and how the learner reaches them.
struct RemoteSite {
  std::string listen;                     // the learner binds its listener here ("ip:0")
  std::vector<std::string> learner_env;   // "NAME=value" added to the learner's environment
  std::vector<std::string> actor_prefix;  // a remote actor's command line starts with these
  std::string description;                // for the launcher's first lines
};

class OtherNode {
 public:
  // A namespace and veth pair named after `id` (the launcher's pid); nullptr, with the reason in
  // `why`, when they cannot be made (no root, no `ip`): then remote_site() is the fallback.
  static std::unique_ptr<OtherNode> make(int id, std::string& why);
  OtherNode(const OtherNode&) = delete;
  OtherNode& operator=(const OtherNode&) = delete;
  ~OtherNode();  // removes the veth pair and the namespace

  RemoteSite site() const;

 private:
  OtherNode() = default;
  std::string name_, here_device_, there_device_, here_ip_, there_ip_;
  bool made_ = false;  // the namespace exists (the destructor removes it)
};

// Remote actors on this host's loopback, when no namespace can be made: the same channels, no veth.
RemoteSite loopback_site();

}  // namespace shared_job

// An actor on a thread of the test process, with a UCX node of its own (as a process has).
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <thread>

#include "tensortree/tree_channel.hpp"

namespace tensortree::test {

// An actor on a thread of this process, with a UCX node of its own: `body` runs with a channel
// connected to `listener` (with `options`). join() returns what it threw ("" when it finished); Catch's checks stay
// on the test's thread.
class ThreadActor {
 public:
  ThreadActor(const TreeListener& listener, std::function<void(TreeChannel&)> body, ChannelOptions options = {})
      : thread_([this, address = listener.address(), body = std::move(body), options] {
          try {
            TreeChannel channel = TreeChannel::connect(address, options);
            body(channel);
          } catch (const std::exception& e) {
            error_ = e.what();
          }
        }) {}
  ~ThreadActor() {
    if (thread_.joinable()) thread_.join();
  }
  ThreadActor(const ThreadActor&) = delete;
  ThreadActor& operator=(const ThreadActor&) = delete;

  std::string join() {
    thread_.join();
    return error_;
  }

 private:
  std::string error_;
  std::thread thread_;
};

}  // namespace tensortree::test

// InProcessBootstrap: a Bootstrap whose members are threads of one process (gloo's tests run their
// ranks this way), over one InProcessStore. Each member's calls are its rounds, numbered in order;
// every wait is bounded by the store's timeout (Timeout names the round and the ranks missing).
// The in-process backend moves its messages through the same store's mailboxes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/bootstrap.hpp"
#include "transport/in_process/in_process_store.hpp"

namespace tensortree::detail {

class InProcessBootstrap final : public Bootstrap {
 public:
  InProcessBootstrap(std::shared_ptr<InProcessStore> store, int rank);

  int rank() const override { return rank_; }
  int size() const override { return store_->size(); }

  std::vector<std::byte> all_gather(std::span<const std::byte> mine) override;
  void broadcast(std::span<std::byte> bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Bootstrap> split(int color, int key) override;

  // The members' shared store (their mailboxes, for the in-process backend).
  const std::shared_ptr<InProcessStore>& store() const { return store_; }

 private:
  std::vector<std::vector<std::byte>> exchange(const char* operation, std::span<const std::byte> mine);

  std::shared_ptr<InProcessStore> store_;
  int rank_;
  std::uint64_t next_round_ = 0;
};

// The `size` bootstraps of one in-process world, by rank: hand bootstrap r to the thread that
// plays rank r. `timeout` bounds every wait of theirs and of their sub-groups.
std::vector<std::unique_ptr<InProcessBootstrap>> make_in_process_bootstraps(int size,
                                                                             std::chrono::milliseconds timeout);

}  // namespace tensortree::detail

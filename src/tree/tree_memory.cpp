// Where a tree's memory lives: pin_memory, to(device, non_blocking), share_memory_.
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/work.hpp"

namespace tensortree {

namespace {

// Copies running on a worker thread: the Work completes when the thread is done and rethrows what
// it threw. Waits for the thread in its destructor, so the copies never outlive their buffers.
class ThreadWork final : public Work {
 public:
  explicit ThreadWork(std::future<void> done) : done_(std::move(done)) {}
  ~ThreadWork() override {
    if (done_.valid()) done_.wait();
  }

 protected:
  bool test() override {
    if (!done_.valid()) return true;
    if (done_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    done_.get();  // rethrows the copy's error
    return true;
  }
  void block() override {
    if (done_.valid()) done_.get();
  }

 private:
  std::future<void> done_;
};

}  // namespace

TensorTree TensorTree::pin_memory() const {
  return transformed(
      [](const Path& path, const Tensor& leaf) {
        if (!leaf.device().is_cpu()) {
          throw InvalidArgument(fmt::format("pin_memory: leaf '{}' is on {}; only CPU leaves can be pinned",
                                            path_str(path), leaf.device()));
        }
        if (leaf.storage()->is_pinned()) return leaf;
        Tensor pinned = Tensor::empty(leaf.shape(), {leaf.dtype(), Device::cpu(), true});
        pinned.copy_(leaf);
        return pinned;
      },
      [](const Shape& batch) { return batch; });
}

TreeTransfer TensorTree::to(Device device, bool non_blocking) const {
  if (!non_blocking) return {to(device), Work::completed()};
  const Device target = resolve_device(device);
  // Destinations are allocated here, on the caller's thread, so that allocation errors surface now.
  std::vector<std::pair<Tensor, Tensor>> copies;
  TensorTree out = apply([&](const Tensor& leaf) {
    if (leaf.device() == target) return leaf;
    Tensor dst = Tensor::empty(leaf.shape(), {leaf.dtype(), target, false});
    copies.emplace_back(dst, leaf);
    return dst;
  });
  if (copies.empty()) return {std::move(out), Work::completed()};
  auto done = std::async(std::launch::async, [copies = std::move(copies)] {
    for (const auto& [dst, src] : copies) dst.copy_(src);
  });
  return {std::move(out), std::make_shared<ThreadWork>(std::move(done))};
}

TensorTree& TensorTree::share_memory_() {
  if (is_shared()) return *this;
  for_each_leaf([](const Path& path, const Tensor& leaf) {
    if (!leaf.device().is_cpu()) {
      throw NotSupported(fmt::format("share_memory_: leaf '{}' is on {}; memfd sharing is for host memory",
                                     path_str(path), leaf.device()));
    }
  });
  // Packed once to learn the layout, then moved into shared memory of exactly that size.
  const TensorTree packed = consolidate();
  const std::size_t nbytes = packed.storage()->nbytes();
  StoragePtr shared = Storage::allocate_shared(nbytes);
  if (nbytes > 0) std::memcpy(shared->data(), packed.storage()->data(), nbytes);
  *this = from_consolidated(std::move(shared), packed.schema());
  return *this;
}

bool TensorTree::is_shared() const {
  bool any = false;
  bool all = true;
  for_each_leaf([&](const Path&, const Tensor& leaf) {
    any = true;
    all = all && leaf.storage()->shared_fd() >= 0;
  });
  return any && all;
}

}  // namespace tensortree

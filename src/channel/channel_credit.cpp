#include "channel/channel_credit.hpp"

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

void SendCredit::grant(const Credit& credit, const std::string& peer) {
  const std::uint64_t reported = sent_ - in_flight_.size();
  if (credit.taken < reported || credit.taken > sent_) {
    throw CorruptData(fmt::format("tree channel: {} says it took {} trees; {} were sent and {} reported taken before",
                                  peer, credit.taken, sent_, reported));
  }
  if (credit.window_trees == 0 || credit.window_trees > kMaxWindowTrees || credit.window_bytes == 0) {
    throw CorruptData(fmt::format("tree channel: {} granted a window of {} trees and {} bytes (1 to {} trees, and "
                                  "some bytes)", peer, credit.window_trees, credit.window_bytes, kMaxWindowTrees));
  }
  for (std::uint64_t i = reported; i < credit.taken; ++i) {
    in_flight_bytes_ -= in_flight_.front();
    in_flight_.pop_front();
  }
  window_ = credit;
  known_ = true;
}

bool SendCredit::allows(std::uint64_t bytes) const {
  if (!known_ || in_flight_.size() >= window_.window_trees) return false;
  return in_flight_.empty() || in_flight_bytes_ + bytes <= window_.window_bytes;
}

void SendCredit::sent(std::uint64_t bytes) {
  ++sent_;
  in_flight_.push_back(bytes);
  in_flight_bytes_ += bytes;
}

ReceiveCredit::ReceiveCredit(std::uint64_t window_trees, std::uint64_t window_bytes)
    : window_trees_(window_trees), window_bytes_(window_bytes) {
  if (window_trees == 0 || window_trees > kMaxWindowTrees || window_bytes == 0) {
    throw InvalidArgument(fmt::format("tree channel: a window of {} trees and {} bytes (1 to {} trees, and some "
                                      "bytes)", window_trees, window_bytes, kMaxWindowTrees));
  }
}

void ReceiveCredit::arrive(std::uint64_t bytes, const std::string& peer) {
  const bool beyond = unreported_.size() >= window_trees_ ||
                      (!unreported_.empty() && unreported_bytes_ + bytes > window_bytes_);
  if (beyond) {
    throw CorruptData(fmt::format("tree channel: {} sent a tree of {} bytes beyond its credit ({} trees of {} "
                                  "bytes in flight; the window is {} trees, {} bytes)",
                                  peer, bytes, unreported_.size(), unreported_bytes_, window_trees_, window_bytes_));
  }
  unreported_.push_back(bytes);
  unreported_bytes_ += bytes;
}

void ReceiveCredit::take() {
  const std::uint64_t index = taken_ - reported_;
  if (index < unreported_.size()) taken_bytes_since_report_ += unreported_[index];
  ++taken_;
}

bool ReceiveCredit::report_due(bool idle) const {
  const std::uint64_t taken_since = taken_ - reported_;
  if (taken_since == 0) return false;
  return idle || 2 * taken_since >= window_trees_ || 2 * taken_bytes_since_report_ >= window_bytes_;
}

Credit ReceiveCredit::report() {
  for (; reported_ < taken_ && !unreported_.empty(); ++reported_) {
    unreported_bytes_ -= unreported_.front();
    unreported_.pop_front();
  }
  reported_ = taken_;
  taken_bytes_since_report_ = 0;
  return {taken_, window_trees_, window_bytes_};
}

}  // namespace tensortree::detail

#include "line_prefix_streambuf.hpp"

#include <utility>

namespace tensortree::test {

LinePrefixStreambuf::LinePrefixStreambuf(std::streambuf* target, std::string prefix)
    : target_(target), prefix_(std::move(prefix)) {}

LinePrefixStreambuf::~LinePrefixStreambuf() {
  if (!pending_line_.empty()) {
    pending_line_ += '\n';
    emit_pending_line();
  }
}

LinePrefixStreambuf::int_type LinePrefixStreambuf::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  pending_line_ += traits_type::to_char_type(ch);
  if (traits_type::to_char_type(ch) == '\n') emit_pending_line();
  return ch;
}

int LinePrefixStreambuf::sync() { return target_->pubsync(); }

void LinePrefixStreambuf::emit_pending_line() {
  const std::string line = prefix_ + pending_line_;
  pending_line_.clear();
  target_->sputn(line.data(), static_cast<std::streamsize>(line.size()));
  // One write per line, flushed at once, so mpiexec never splices two ranks inside a line.
  target_->pubsync();
}

}  // namespace tensortree::test

// A streambuf that forwards whole lines to another streambuf, each starting with a fixed prefix.
// Under mpiexec every rank writes to the same terminal; whole, tagged lines keep ranks apart.
#pragma once

#include <streambuf>
#include <string>

namespace tensortree::test {

class LinePrefixStreambuf : public std::streambuf {
 public:
  LinePrefixStreambuf(std::streambuf* target, std::string prefix);
  LinePrefixStreambuf(const LinePrefixStreambuf&) = delete;
  LinePrefixStreambuf& operator=(const LinePrefixStreambuf&) = delete;
  // Emits a last line that never got its newline.
  ~LinePrefixStreambuf() override;

 protected:
  int_type overflow(int_type ch) override;
  // Flushes the target but keeps a partial line: a prefix must only ever start a line.
  int sync() override;

 private:
  void emit_pending_line();

  std::streambuf* target_;
  std::string prefix_;
  std::string pending_line_;
};

}  // namespace tensortree::test

// extend(): rows reserved by one fetch_add on the shared cursor, claimed one by one (sequence
// number odd, owner tag set), written in place with one copy per leaf and contiguous run, then
// published (sequence number even). A row still held by a live writer of an earlier lap is
// waited for (bounded); one held by a dead writer is taken over; one a later lap already claimed
// is left to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/wait_bounded.hpp"
#include "rl/replay/control_block.hpp"
#include "rl/replay/row_store.hpp"
#include "tensortree/tree.hpp"

namespace tensortree::detail {

class RowWriter {
 public:
  // The tables are kept between calls: an extend allocates nothing unless a leaf needs a
  // contiguous host copy first.
  void extend(const TensorTree& rows, const ControlBlock& control, const RowStore& store,
              std::chrono::milliseconds timeout);

 private:
  // Fills sources_ (layout order) from `rows`, checking keys, dtypes and row shapes.
  void match(const TensorTree& rows, const RowStore& store);
  void match_by_path(const TensorTree& rows, const RowStore& store);
  void check_leaf(const Path& path, const Tensor& leaf, std::size_t index, const RowStore& store);
  void set_priorities(const ControlBlock& control, std::chrono::milliseconds timeout, bool published);
  void write_run(const RowStore& store, std::int64_t first_row, std::int64_t source_row, std::int64_t count);

  std::vector<const std::byte*> sources_;
  std::vector<Tensor> copies_;
  std::vector<std::uint64_t> tickets_;  // tickets of the rows this extend claimed, in order
  std::int64_t rows_ = 0;
};

// How long a row claimed under an owner of another ticket (its new owner not yet recorded), or a
// ticket reserved but not yet claimed, is given before its writer is presumed dead.
inline constexpr auto kOwnerGrace = std::chrono::milliseconds(100);

// Whether the writer of odd sequence number `seq` on `row`, first seen holding it at `first_seen`,
// may still be writing: it recorded itself for that ticket and runs (its pid not reused since).
bool holder_may_write(const ControlBlock& control, std::int64_t row, std::uint64_t seq,
                      WaitClock::time_point first_seen);

// Claims row `ticket % capacity` for `ticket`: true when this writer may write it.
bool claim_row(const ControlBlock& control, std::uint64_t ticket, std::chrono::milliseconds timeout);

}  // namespace tensortree::detail

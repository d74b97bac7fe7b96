#include "core/elementwise_cpu.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>

namespace tensortree::detail {

namespace {

constexpr std::int64_t kParallelBytes = std::int64_t{1} << 20;
constexpr std::int64_t kChunkBytes = std::int64_t{256} << 10;

template <std::size_t N>
void split_rows_of(const std::array<Tensor, N>& views, std::int64_t bytes, const ViewsBody<N>& loop) {
  if (views[0].dim() == 0) {
    loop(views);
    return;
  }
  parallel_range(views[0].size(0), bytes, [&](std::int64_t begin, std::int64_t end) {
    std::array<Tensor, N> part;
    for (std::size_t k = 0; k < N; ++k) part[k] = views[k].narrow(0, begin, end - begin);
    loop(part);
  });
}

}  // namespace

void parallel_range(std::int64_t n, std::int64_t bytes, const RangeBody& body) {
  if (bytes < kParallelBytes || n < 2) {
    body(0, n);
    return;
  }
  const std::int64_t grain = std::max<std::int64_t>(1, n * kChunkBytes / bytes);
  oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<std::int64_t>(0, n, grain),
                            [&body](const oneapi::tbb::blocked_range<std::int64_t>& r) { body(r.begin(), r.end()); });
}

void split_rows(const std::array<Tensor, 2>& views, std::int64_t bytes, const ViewsBody<2>& loop) {
  split_rows_of(views, bytes, loop);
}

void split_rows(const std::array<Tensor, 3>& views, std::int64_t bytes, const ViewsBody<3>& loop) {
  split_rows_of(views, bytes, loop);
}

}  // namespace tensortree::detail

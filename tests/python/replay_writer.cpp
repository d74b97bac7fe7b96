// A C++ process writing rows into a replay buffer that a Python test samples: `rows` rows in
// extends of `batch`, row r holding step r, obs[j] = r * 8 + j (int32) and next/reward = r / 4.
//
//   replay_writer <buffer directory> <rows> <batch>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "tensortree/replay_buffer.hpp"
#include "tensortree/tensortree.hpp"

using namespace tensortree;

namespace {

constexpr std::int64_t kObs = 6;

void fill(const TensorTree& rows, std::int64_t first) {
  const std::int64_t n = rows.batch_size()[0];
  auto* step = rows.get("step").data<std::int64_t>();
  auto* obs = rows.get("obs").data<std::int32_t>();
  auto* reward = rows.get(Path{"next", "reward"}).data<double>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = first + i;
    step[i] = r;
    for (std::int64_t j = 0; j < kObs; ++j) obs[i * kObs + j] = static_cast<std::int32_t>(r * 8 + j);
    reward[i] = static_cast<double>(r) / 4;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: replay_writer <buffer directory> <rows> <batch>\n");
    return 2;
  }
  try {
    const std::int64_t total = std::stoll(argv[2]);
    const std::int64_t batch = std::stoll(argv[3]);
    ReplayBuffer replay = ReplayBuffer::open(argv[1]);
    TensorTree rows(Shape{batch});
    rows.set("step", Tensor::empty({batch}, {DType::Int64}));
    rows.set("obs", Tensor::empty({batch, kObs}, {DType::Int32}));
    rows.set(Path{"next", "reward"}, Tensor::empty({batch}, {DType::Float64}));
    for (std::int64_t first = 0; first < total; first += batch) {
      fill(rows, first);
      replay.extend(first + batch <= total ? rows : rows.slice(0, {0, total - first}));
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "replay_writer: %s\n", error.what());
    return 1;
  }
}

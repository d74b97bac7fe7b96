// MpiBackend's construction and its collectives; the point-to-point operations are in
// mpi_point_to_point.cpp.
#include "transport/mpi/mpi_backend.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/reduction_rules.hpp"
#include "core/text_format.hpp"
#include "transport/mpi/mpi_argument_check.hpp"
#include "transport/mpi/mpi_blocks.hpp"
#include "transport/mpi/mpi_check.hpp"
#include "transport/mpi/mpi_datatypes.hpp"
#include "transport/mpi/mpi_work.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace {

// What gather and scatter share: every rank's own block, and the root's buffer of all blocks.
struct RootedBlocks {
  std::shared_ptr<MpiWork> work;
  Block block;
  bool is_root;
  bool in_place;  // the root's own block already sits where it belongs in `all`
};

RootedBlocks rooted_blocks(const Check& check, const Tensor& all, std::string_view all_name, const Tensor& own,
                           std::string_view own_name, int root, int rank, int size, std::int64_t max_count,
                           const WaitLimit& limit) {
  check.host(own, own_name);
  check.group_rank(root, "root");
  const bool is_root = rank == root;
  if (is_root) {
    check.host(all, all_name);
    check.same_dtype(all, own.dtype(), all_name);
    check.elements(all, own.numel() * size, all_name);
  }
  auto work = std::make_shared<MpiWork>(rank, limit);
  work->keep(own);
  if (is_root) work->keep(all);
  const Block block = block_of(own.numel(), own.dtype(), max_count, *work);
  const bool in_place = is_root && own.data_ptr() == element_at(all, rank * own.numel());
  return {std::move(work), block, is_root, in_place};
}

}  // namespace

MpiBackend::MpiBackend(MPI_Comm comm, MpiBackendOptions options) : comm_(comm), options_(options) {
  if (options_.max_count < 1 || options_.max_count > INT_MAX) {
    throw InvalidArgument(fmt::format("MpiBackendOptions::max_count must be in 1..{}, got {}", INT_MAX,
                                      options_.max_count));
  }
  TT_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  TT_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  void* tag_upper_bound = nullptr;
  int present = 0;
  TT_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_upper_bound, &present));
  if (present) tag_upper_bound_ = *static_cast<int*>(tag_upper_bound);
}

WorkPtr MpiBackend::broadcast(const Tensor& tensor, int root) {
  const Check check(rank_, size_, "broadcast");
  check.host(tensor, "tensor");
  check.group_rank(root, "root");
  auto work = std::make_shared<MpiWork>(rank_, limit("broadcast"));
  work->keep(tensor);
  const Block block = block_of(tensor.numel(), tensor.dtype(), options_.max_count, *work);
  TT_MPI_CHECK(MPI_Ibcast(tensor.data_ptr(), block.count, block.datatype, root, comm_, work->request_slot()));
  return work;
}

WorkPtr MpiBackend::all_reduce(const Tensor& tensor, ReduceOp op) {
  const Check check(rank_, size_, "all_reduce");
  check.host(tensor, "tensor");
  const MpiReduction how = reductions_.resolve(tensor.dtype(), op, rank_);
  auto work = std::make_shared<MpiWork>(rank_, limit("all_reduce"));
  work->keep(tensor);
  for_each_chunk(tensor.numel(), options_.max_count, [&](std::int64_t offset, int count) {
    TT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, element_at(tensor, offset), count, how.datatype, how.op, comm_,
                                work->request_slot()));
  });
  if (how.average) return Work::then(std::move(work), [tensor, size = size_] { divide_in_place(tensor, size); });
  return work;
}

WorkPtr MpiBackend::reduce(const Tensor& tensor, int root, ReduceOp op) {
  const Check check(rank_, size_, "reduce");
  check.host(tensor, "tensor");
  check.group_rank(root, "root");
  const MpiReduction how = reductions_.resolve(tensor.dtype(), op, rank_);
  auto work = std::make_shared<MpiWork>(rank_, limit("reduce"));
  work->keep(tensor);
  const bool is_root = rank_ == root;
  for_each_chunk(tensor.numel(), options_.max_count, [&](std::int64_t offset, int count) {
    std::byte* chunk = element_at(tensor, offset);
    TT_MPI_CHECK(MPI_Ireduce(is_root ? MPI_IN_PLACE : chunk, is_root ? chunk : nullptr, count, how.datatype, how.op,
                             root, comm_, work->request_slot()));
  });
  if (how.average && is_root) {
    return Work::then(std::move(work), [tensor, size = size_] { divide_in_place(tensor, size); });
  }
  return work;
}

WorkPtr MpiBackend::all_gather(const Tensor& output, const Tensor& input) {
  const Check check(rank_, size_, "all_gather");
  check.host(output, "output");
  check.host(input, "input");
  check.same_dtype(output, input.dtype(), "output");
  check.elements(output, input.numel() * size_, "output");
  auto work = std::make_shared<MpiWork>(rank_, limit("all_gather"));
  work->keep(output);
  work->keep(input);
  const Block block = block_of(input.numel(), input.dtype(), options_.max_count, *work);
  // An input that already sits in this rank's block of the output is passed in place.
  const bool in_place = input.data_ptr() == element_at(output, rank_ * input.numel());
  TT_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : input.data_ptr(), block.count, block.datatype,
                              output.data_ptr(), block.count, block.datatype, comm_, work->request_slot()));
  return work;
}

WorkPtr MpiBackend::gather(const Tensor& output, const Tensor& input, int root) {
  const Check check(rank_, size_, "gather");
  const RootedBlocks rooted =
      rooted_blocks(check, output, "output", input, "input", root, rank_, size_, options_.max_count,
                    limit("gather"));
  TT_MPI_CHECK(MPI_Igather(rooted.in_place ? MPI_IN_PLACE : input.data_ptr(), rooted.block.count,
                           rooted.block.datatype, rooted.is_root ? output.data_ptr() : nullptr, rooted.block.count,
                           rooted.block.datatype, root, comm_, rooted.work->request_slot()));
  return rooted.work;
}

WorkPtr MpiBackend::scatter(const Tensor& output, const Tensor& input, int root) {
  const Check check(rank_, size_, "scatter");
  const RootedBlocks rooted =
      rooted_blocks(check, input, "input", output, "output", root, rank_, size_, options_.max_count,
                    limit("scatter"));
  TT_MPI_CHECK(MPI_Iscatter(rooted.is_root ? input.data_ptr() : nullptr, rooted.block.count, rooted.block.datatype,
                            rooted.in_place ? MPI_IN_PLACE : output.data_ptr(), rooted.block.count,
                            rooted.block.datatype, root, comm_, rooted.work->request_slot()));
  return rooted.work;
}

WorkPtr MpiBackend::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  const Check check(rank_, size_, "reduce_scatter");
  check.host(output, "output");
  check.host(input, "input");
  check.same_dtype(input, output.dtype(), "input");
  const std::int64_t block = output.numel();
  check.elements(input, block * size_, "input");
  const MpiReduction how = reductions_.resolve(output.dtype(), op, rank_);
  auto work = std::make_shared<MpiWork>(rank_, limit("reduce_scatter"));
  work->keep(output);
  work->keep(input);
  if (block <= options_.max_count) {
    TT_MPI_CHECK(MPI_Ireduce_scatter_block(input.data_ptr(), output.data_ptr(), static_cast<int>(block),
                                           how.datatype, how.op, comm_, work->request_slot()));
  } else {
    // Reductions cannot use derived datatypes: reduce each rank's block to it, chunk by chunk.
    for (int root = 0; root < size_; ++root) {
      for_each_chunk(block, options_.max_count, [&](std::int64_t offset, int count) {
        TT_MPI_CHECK(MPI_Ireduce(element_at(input, root * block + offset),
                                 root == rank_ ? element_at(output, offset) : nullptr, count, how.datatype, how.op,
                                 root, comm_, work->request_slot()));
      });
    }
  }
  if (how.average) return Work::then(std::move(work), [output, size = size_] { divide_in_place(output, size); });
  return work;
}

WorkPtr MpiBackend::all_to_all(const Tensor& output, const Tensor& input, std::span<const std::int64_t> output_counts,
                               std::span<const std::int64_t> input_counts) {
  const Check check(rank_, size_, "all_to_all");
  check.host(output, "output");
  check.host(input, "input");
  check.same_dtype(input, output.dtype(), "input");
  check.counts(output_counts, output, "output_counts");
  check.counts(input_counts, input, "input_counts");
  auto work = std::make_shared<MpiWork>(rank_, limit("all_to_all"));
  work->keep(output);
  work->keep(input);
  const MPI_Datatype element = element_datatype(output.dtype());
  if (std::max(output.numel(), input.numel()) <= options_.max_count) {
    const int* send_counts = work->keep(as_ints(input_counts));
    const int* send_displacements = work->keep(as_ints(displacements_of(input_counts)));
    const int* receive_counts = work->keep(as_ints(output_counts));
    const int* receive_displacements = work->keep(as_ints(displacements_of(output_counts)));
    TT_MPI_CHECK(MPI_Ialltoallv(input.data_ptr(), send_counts, send_displacements, element, output.data_ptr(),
                                receive_counts, receive_displacements, element, comm_, work->request_slot()));
    return work;
  }
  // Beyond int counts and displacements: one datatype per block, placed at its byte offset.
  const PlacedBlocks sent = placed_blocks(input_counts, element, options_.max_count, *work);
  const PlacedBlocks received = placed_blocks(output_counts, element, options_.max_count, *work);
  const int* zeros = work->keep(std::vector<int>(static_cast<std::size_t>(size_), 0));
  TT_MPI_CHECK(MPI_Ialltoallw(input.data_ptr(), sent.counts, zeros, sent.datatypes, output.data_ptr(),
                              received.counts, zeros, received.datatypes, comm_, work->request_slot()));
  return work;
}

}  // namespace tensortree::detail

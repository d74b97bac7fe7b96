// What main() of a program run under mpiexec does around its own work (the actor-learner job, the
// MPI benchmarks in tools/): parse the flags, start MPI, pick the device a --device flag names, and
// end the whole job when one rank fails. Not part of the library: a helper of its programs.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "tensortree/device.hpp"
#include "tensortree/dist_context.hpp"

namespace mpi_program {

// One write per line, flushed, so that the ranks' lines never interleave mid-line.
inline void complain(const std::string& line) {
  const std::string text = line + '\n';
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

// Parses the flags that add_flags(app, options) declares, starts MPI and returns
// work(context, options), the process's exit code. --help and a bad flag end the program before MPI
// starts, with CLI11's exit code. An exception from `work` is printed as "[rank N] failed: ..." and
// ends the process without finalizing MPI: mpiexec then ends the other ranks, which may be waiting
// in a collective or a receive this rank will never join.
template <class Options, class AddFlags, class Work>
int run(int argc, char** argv, const std::string& description, AddFlags add_flags, Work work) {
  CLI::App app{description};
  Options options;
  add_flags(app, options);
  CLI11_PARSE(app, argc, argv);

  tensortree::DistributedContext context(&argc, &argv);
  try {
    return work(context, std::as_const(options));
  } catch (const std::exception& error) {
    complain("[rank " + std::to_string(context.rank()) + "] failed: " + error.what());
    std::exit(EXIT_FAILURE);
  }
}

// The device a --device flag ("cpu" or "cuda") names: cuda is the GPU the context bound this rank
// to. Nothing where this rank has none, after rank 0 said so; the program then exits 77 (skipped).
inline std::optional<tensortree::Device> device_named(const tensortree::DistributedContext& context,
                                                      const std::string& name) {
  const tensortree::Device device = name == "cuda" ? context.device() : tensortree::Device::cpu();
  if (name == "cuda" && !device.is_cuda()) {
    if (context.rank() == 0) complain("no CUDA device: nothing to run on cuda");
    return std::nullopt;
  }
  return device;
}

}  // namespace mpi_program

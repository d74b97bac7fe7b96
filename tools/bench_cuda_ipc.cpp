// bench_cuda_ipc: what each step of a CUDA IPC transfer between two ranks on one GPU costs, below
// the library (raw CUDA runtime and MPI), to tell the copy from the fixed costs around it. Rank 0
// owns an exported allocation; rank 1 has it open. Each row is one way to hand the bytes over,
// timed on rank 0 from the first frame to the last acknowledgement, over --iters transfers:
//
//   mpi-frame-ack   a 192-byte frame to rank 1 and its 16-byte acknowledgement back (host only)
//   event           rank 0 records an interprocess event on its stream and sends the frame; rank 1
//                   waits for the event on its stream, copies out of the mapping, synchronizes and
//                   acknowledges (what the library's transport did)
//   event+legacy    the same behind a synchronization of the legacy stream (the library's ordering
//                   of the payload's producer before its copy)
//   host-sync       rank 0 synchronizes its stream before the frame (no event); rank 1 copies,
//                   synchronizes and acknowledges
//   d2d-copy        one device-to-device copy of the same bytes on rank 0, synchronized (the floor)
//   header-read     a 64-byte device-to-host cudaMemcpy on rank 0 (what reading a wire header costs)
//
//   mpiexec -n 2 bench_cuda_ipc [--sizes 4096,262144,67108864] [--iters 200] [--csv]
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_table.hpp"

namespace {

constexpr int kFrameBytes = 192;
constexpr int kAckBytes = 16;
constexpr int kFrameTag = 1;
constexpr int kAckTag = 2;

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "bench_cuda_ipc: %s: %s\n", what, cudaGetErrorString(status));
  MPI_Abort(MPI_COMM_WORLD, 2);
}

// What both ranks hold: rank 0's allocation and event (exported), rank 1's mapping of them.
struct Pair {
  int rank = 0;
  std::size_t bytes = 0;
  void* local = nullptr;   // rank 0: the exported allocation; rank 1: the destination
  void* mapped = nullptr;  // rank 1: rank 0's allocation
  cudaEvent_t ipc_event = nullptr;
  cudaStream_t stream = nullptr;
};

Pair open_pair(int rank, std::size_t bytes) {
  Pair pair{rank, bytes};
  check(cudaStreamCreateWithFlags(&pair.stream, cudaStreamNonBlocking), "stream");
  check(cudaMalloc(&pair.local, bytes), "cudaMalloc");
  check(cudaMemset(pair.local, rank + 1, bytes), "memset");
  cudaIpcMemHandle_t memory{};
  cudaIpcEventHandle_t event{};
  if (rank == 0) {
    check(cudaEventCreateWithFlags(&pair.ipc_event, cudaEventDisableTiming | cudaEventInterprocess), "event");
    check(cudaIpcGetMemHandle(&memory, pair.local), "cudaIpcGetMemHandle");
    check(cudaIpcGetEventHandle(&event, pair.ipc_event), "cudaIpcGetEventHandle");
  }
  MPI_Bcast(&memory, sizeof memory, MPI_BYTE, 0, MPI_COMM_WORLD);
  MPI_Bcast(&event, sizeof event, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank == 1) {
    check(cudaIpcOpenMemHandle(&pair.mapped, memory, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
    check(cudaIpcOpenEventHandle(&pair.ipc_event, event), "cudaIpcOpenEventHandle");
  }
  check(cudaDeviceSynchronize(), "sync");
  return pair;
}

void close_pair(Pair& pair) {
  if (pair.mapped != nullptr) check(cudaIpcCloseMemHandle(pair.mapped), "cudaIpcCloseMemHandle");
  MPI_Barrier(MPI_COMM_WORLD);
  check(cudaEventDestroy(pair.ipc_event), "event destroy");
  check(cudaFree(pair.local), "cudaFree");
  check(cudaStreamDestroy(pair.stream), "stream destroy");
}

enum class Handover { FrameOnly, Event, EventAfterLegacy, HostSync };

// One transfer: rank 0's side, then rank 1's.
void send_side(const Pair& pair, Handover how) {
  char frame[kFrameBytes] = {};
  char ack[kAckBytes];
  if (how == Handover::EventAfterLegacy) check(cudaStreamSynchronize(cudaStreamLegacy), "legacy sync");
  if (how == Handover::Event || how == Handover::EventAfterLegacy) {
    check(cudaEventRecord(pair.ipc_event, pair.stream), "record");
  }
  if (how == Handover::HostSync) check(cudaStreamSynchronize(pair.stream), "sync");
  MPI_Send(frame, kFrameBytes, MPI_BYTE, 1, kFrameTag, MPI_COMM_WORLD);
  MPI_Recv(ack, kAckBytes, MPI_BYTE, 1, kAckTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

void receive_side(const Pair& pair, Handover how) {
  char frame[kFrameBytes];
  char ack[kAckBytes] = {};
  MPI_Recv(frame, kFrameBytes, MPI_BYTE, 0, kFrameTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (how != Handover::FrameOnly) {
    if (how != Handover::HostSync) check(cudaStreamWaitEvent(pair.stream, pair.ipc_event, 0), "wait event");
    check(cudaMemcpyAsync(pair.local, pair.mapped, pair.bytes, cudaMemcpyDeviceToDevice, pair.stream), "copy");
    check(cudaStreamSynchronize(pair.stream), "sync");
  }
  MPI_Send(ack, kAckBytes, MPI_BYTE, 0, kAckTag, MPI_COMM_WORLD);
}

double seconds_per_transfer(const Pair& pair, Handover how, int iters) {
  const auto one = [&] { pair.rank == 0 ? send_side(pair, how) : receive_side(pair, how); };
  for (int i = 0; i < 5; ++i) one();
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) one();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return seconds;
}

// Rank 0 alone; the other rank waits at the broadcast.
double seconds_on_rank0(const Pair& pair, const std::function<void()>& step, int iters) {
  double seconds = 0;
  if (pair.rank == 0) seconds = tensortree::bench::time_per_call(step, 0.05, iters, iters * 10, 5);
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return seconds;
}

std::string micros(double seconds) { return tensortree::bench::fixed(seconds * 1e6, 1); }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CLI::App app("bench_cuda_ipc: the steps of a CUDA IPC transfer between two ranks on one GPU");
  std::vector<std::size_t> sizes = {4096, 262144, std::size_t{64} << 20};
  int iters = 200;
  bool csv = false;
  app.add_option("--sizes", sizes, "transfer sizes in bytes")->delimiter(',');
  app.add_option("--iters", iters, "timed transfers per row")->check(CLI::PositiveNumber);
  app.add_flag("--csv", csv, "CSV instead of a table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    MPI_Finalize();
    return code;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    if (rank == 0) std::fprintf(stderr, "bench_cuda_ipc: no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "bench_cuda_ipc: run it on 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  tensortree::bench::Table table({"bytes", "step", "us"}, csv);
  for (const std::size_t bytes : sizes) {
    Pair pair = open_pair(rank, bytes);
    const std::string label = std::to_string(bytes);
    table.add({label, "mpi-frame-ack", micros(seconds_per_transfer(pair, Handover::FrameOnly, iters))});
    table.add({label, "event", micros(seconds_per_transfer(pair, Handover::Event, iters))});
    table.add({label, "event+legacy", micros(seconds_per_transfer(pair, Handover::EventAfterLegacy, iters))});
    table.add({label, "host-sync", micros(seconds_per_transfer(pair, Handover::HostSync, iters))});
    void* copy = nullptr;
    if (rank == 0) check(cudaMalloc(&copy, bytes), "cudaMalloc");
    table.add({label, "d2d-copy", micros(seconds_on_rank0(pair, [&] {
                 check(cudaMemcpyAsync(copy, pair.local, bytes, cudaMemcpyDeviceToDevice, pair.stream), "copy");
                 check(cudaStreamSynchronize(pair.stream), "sync");
               }, iters))});
    char header[64];
    table.add({label, "header-read", micros(seconds_on_rank0(pair, [&] {
                 check(cudaMemcpy(header, pair.local, sizeof header, cudaMemcpyDeviceToHost), "header");
               }, iters))});
    if (copy != nullptr) check(cudaFree(copy), "cudaFree");
    close_pair(pair);
  }
  if (rank == 0) table.print();
  MPI_Finalize();
  return 0;
}

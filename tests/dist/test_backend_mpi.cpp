// MpiBackend, operation by operation, below dist_ops: every collective with every reduce op on the
// dtypes MPI reduces natively and through widening, on the world, sub-groups and each mesh
// dimension; rank-dependent non-zero data, non-zero roots, every element checked on every rank.
// Each group is exercised through three backends: the group's own, one with max_count lowered to 5
// (so 13-element tensors take the chunked and derived-datatype paths that tensors beyond INT_MAX
// elements take), and the pinned-staging decorator that CUDA tensors use when NCCL is absent.
#include <catch2/catch.hpp>

#include <chrono>
#include <complex>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/group_state.hpp"
#include "transport/mpi/mpi_backend.hpp"
#include "transport/mpi/mpi_bootstrap.hpp"
#include "transport/staged/staged_backend.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"

using namespace tensortree;
using namespace std::chrono_literals;

namespace {

// The communicator of a group made by a DistributedContext (whose bootstrap is MPI's).
// The group's own MPI engine: the transport of its own rank (shared memory may serve the others).
detail::Engine& engine_of(const Group& group) {
  return dynamic_cast<detail::Engine&>(group.transport(group.rank(), Device::cpu()));
}

MPI_Comm mpi_comm_of(const Group& group) {
  return dynamic_cast<detail::MpiBootstrap&>(detail::GroupAccess::require(group).bootstrap()).comm();
}

constexpr std::int64_t kElements = 13;  // more than two chunks of the lowered max_count
constexpr std::int64_t kLoweredMaxCount = 5;

// ---- values --------------------------------------------------------------------------------------

using Value = std::complex<double>;
using ValueAt = std::function<Value(std::int64_t)>;

template <class T>
T element_of(Value value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value.real() != 0.0;
  } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    return T(static_cast<typename T::value_type>(value.real()), static_cast<typename T::value_type>(value.imag()));
  } else if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<T>(value.real());
  } else {
    return T(static_cast<float>(value.real()));  // Half, BFloat16, Float8*
  }
}

// A contiguous tensor whose element i (C order) is value(i), rounded to the dtype.
Tensor make_tensor(Shape shape, DType dtype, const ValueAt& value) {
  Tensor tensor = Tensor::empty(std::move(shape), {dtype});
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(tensor.data_ptr());
    for (std::int64_t i = 0; i < tensor.numel(); ++i) data[i] = element_of<T>(value(i));
  });
  return tensor;
}

template <class T>
Value value_of(T element) {
  if constexpr (std::is_same_v<T, bool>) {
    return element ? 1.0 : 0.0;
  } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    return {static_cast<double>(element.real()), static_cast<double>(element.imag())};
  } else if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<double>(element);
  } else {
    return static_cast<double>(static_cast<float>(element));
  }
}

// value rounded to the dtype, as a tensor element holds it.
Value representable(Value value, DType dtype) {
  return visit_dtype(dtype, [value](auto tag) { return value_of(element_of<decltype(tag)>(value)); });
}

// Empty when element i of `tensor` is expected(i) (rounded to its dtype) for every i; otherwise
// the first element that differs, its value and the expected one.
std::string first_mismatch(const Tensor& tensor, const ValueAt& expected) {
  const Tensor wanted = make_tensor(tensor.shape(), tensor.dtype(), expected);
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    if (tensor.value_at_linear(i) != wanted.value_at_linear(i)) {
      std::ostringstream os;
      os << "element " << i << " is " << tensor.value_at_linear(i) << ", expected " << wanted.value_at_linear(i)
         << " (" << dtype_name(tensor.dtype()) << ")";
      return os.str();
    }
  }
  return {};
}

bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::BitwiseAnd || op == ReduceOp::BitwiseOr || op == ReduceOp::BitwiseXor;
}

bool is_float8(DType dtype) { return dtype == DType::Float8_e4m3fn || dtype == DType::Float8_e5m2; }

// What `rank` contributes at element i to a reduction with `op`: non-zero, different on every
// rank, small enough that every partial sum and product is exact in the dtype (1..3 for products
// and float8, whose mantissas are short). Bool mixes true and false.
Value contribution(DType dtype, ReduceOp op, int rank, std::int64_t i) {
  if (dtype == DType::Bool) return (rank * 5 + i) % 3 != 0 || i % 4 == 0 ? 1.0 : 0.0;
  if (is_bitwise(op)) return static_cast<double>(((rank + 1) * 37 + i * 11) % 127 + 1);
  const bool small = op == ReduceOp::Product || is_float8(dtype);
  const double real = 1.0 + static_cast<double>(small ? (rank + i) % 3 : (rank * 7 + i * 3) % 11);
  const double imaginary = is_complex(dtype) ? 1.0 + static_cast<double>((rank + 2 * i) % 3) : 0.0;
  return representable({real, imaginary}, dtype);
}

Value reduced_bool(ReduceOp op, int size, const std::function<Value(int)>& of_rank) {
  int trues = 0;
  for (int r = 0; r < size; ++r) trues += of_rank(r).real() != 0.0 ? 1 : 0;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max:
    case ReduceOp::BitwiseOr: return trues > 0 ? 1.0 : 0.0;
    case ReduceOp::BitwiseXor: return trues % 2 == 1 ? 1.0 : 0.0;
    default: return trues == size ? 1.0 : 0.0;
  }
}

Value reduced_bits(ReduceOp op, int size, const std::function<Value(int)>& of_rank) {
  auto bits = static_cast<std::int64_t>(of_rank(0).real());
  for (int r = 1; r < size; ++r) {
    const auto next = static_cast<std::int64_t>(of_rank(r).real());
    bits = op == ReduceOp::BitwiseAnd ? bits & next : op == ReduceOp::BitwiseOr ? bits | next : bits ^ next;
  }
  return static_cast<double>(bits);
}

// The reference reduction of the `size` ranks' values, in exact arithmetic.
Value reduced(ReduceOp op, DType dtype, int size, const std::function<Value(int)>& of_rank) {
  if (dtype == DType::Bool) return reduced_bool(op, size, of_rank);
  if (is_bitwise(op)) return reduced_bits(op, size, of_rank);
  Value result = of_rank(0);
  for (int r = 1; r < size; ++r) {
    const Value next = of_rank(r);
    switch (op) {
      case ReduceOp::Product: result *= next; break;
      case ReduceOp::Min: result = std::min(result.real(), next.real()); break;
      case ReduceOp::Max: result = std::max(result.real(), next.real()); break;
      default: result += next; break;
    }
  }
  if (op != ReduceOp::Avg) return result;
  if (is_integral(dtype)) return std::trunc(result.real() / size);
  return result / static_cast<double>(size);
}

// ---- groups and backends under test ------------------------------------------------------------

struct TestedBackend {
  std::string name;
  detail::Engine* backend;
};

struct Scope {
  std::string name;
  Group group;
  std::vector<TestedBackend> backends;  // empty where this rank is not a member
};

// The groups under test and their backends. Collective: every rank builds the same groups in the
// same order. Each test case builds its own, so that every communicator is freed before the harness
// finalises MPI.
class Fixture {
 public:
  Fixture() {
    const int size = context_.size();
    add("world", context_.world());
    if (size >= 3) {
      std::vector<int> tail(static_cast<std::size_t>(size - 1));
      std::iota(tail.begin(), tail.end(), 1);
      add("ranks 1.." + std::to_string(size - 1), context_.new_group(tail));
    }
    // Listed last rank first: group rank 0 is world rank size-1.
    add("ranks {" + std::to_string(size - 1) + ", 0}", context_.new_group({size - 1, 0}));
    mesh_.emplace(context_.mesh(mesh_dims(size)));
    for (const MeshDim& dim : mesh_->dims()) add("mesh dim " + dim.name, mesh_->group(dim.name));
  }

  const DistributedContext& context() const { return context_; }
  detail::Engine& world() const { return engine_of(context_.world()); }

  // Runs `test(backend)` for every backend of every group this rank belongs to.
  template <class Test>
  void for_each_backend(Test&& test) const {
    for (const Scope& scope : scopes_) {
      for (const TestedBackend& tested : scope.backends) {
        INFO("group " << scope.name << " (size " << scope.group.size() << "), backend " << tested.name
                      << ", group rank " << tested.backend->rank());
        test(*tested.backend);
      }
    }
  }

 private:
  static std::vector<MeshDim> mesh_dims(int size) {
    if (size == 4) return {{"dp", 2}, {"tp", 2}};
    if (size == 2) return {{"dp", 2}, {"tp", 1}};
    return {{"x", size}};
  }

  void add(std::string name, const Group& group) {
    Scope scope{std::move(name), group, {}};
    if (group.is_member()) {
      detail::Engine& own = engine_of(group);
      lowered_.push_back(
          std::make_unique<detail::MpiBackend>(mpi_comm_of(group), detail::MpiBackendOptions{kLoweredMaxCount}));
      staged_.push_back(std::make_unique<detail::StagedBackend>(own));
      scope.backends = {{"mpi", &own},
                        {"mpi with max_count 5", lowered_.back().get()},
                        {"mpi staged", staged_.back().get()}};
    }
    scopes_.push_back(std::move(scope));
  }

  DistributedContext context_;
  std::optional<DeviceMesh> mesh_;
  std::vector<Scope> scopes_;
  std::vector<std::unique_ptr<detail::Engine>> lowered_;
  std::vector<std::unique_ptr<detail::Engine>> staged_;
};

// Non-zero roots where the group has them: the last rank, and rank 1 of groups of three or more.
std::vector<int> roots_of(const detail::Engine& backend) {
  std::vector<int> roots{backend.size() - 1};
  if (backend.size() >= 3) roots.push_back(1);
  return roots;
}

struct ReduceCase {
  DType dtype;
  ReduceOp op;
};

std::vector<ReduceCase> reduce_cases() {
  using enum ReduceOp;
  std::vector<ReduceCase> cases;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8}) {
    for (ReduceOp op : {Sum, Product, Min, Max, Avg}) cases.push_back({dtype, op});
  }
  for (DType dtype : {DType::Int32, DType::Int64, DType::UInt8, DType::Bool}) {
    for (ReduceOp op : {BitwiseAnd, BitwiseOr, BitwiseXor}) cases.push_back({dtype, op});
  }
  for (ReduceOp op : {Sum, Product, Min, Max}) cases.push_back({DType::Bool, op});
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    for (ReduceOp op : {Sum, Product, Min, Max, Avg}) cases.push_back({dtype, op});
  }
  for (ReduceOp op : {Sum, Product, Avg}) cases.push_back({DType::Complex64, op});
  cases.push_back({DType::Complex128, Sum});
  cases.push_back({DType::Float8_e4m3fn, Sum});
  cases.push_back({DType::Float8_e4m3fn, Max});
  return cases;
}

ValueAt contributions_of(DType dtype, ReduceOp op, int rank, std::int64_t offset = 0) {
  return [=](std::int64_t i) { return contribution(dtype, op, rank, offset + i); };
}

ValueAt reduced_at(DType dtype, ReduceOp op, int size, std::int64_t offset = 0) {
  return [=](std::int64_t i) {
    return reduced(op, dtype, size, [&](int r) { return contribution(dtype, op, r, offset + i); });
  };
}

// A value that names the sending rank, the receiving rank and the element: distinct for each.
Value pair_value(int from, int to, std::int64_t i) {
  return 1.0 + static_cast<double>(from * 100 + to * 17 + i);
}

ValueAt pair_values(int from, int to, std::int64_t offset = 0) {
  return [=](std::int64_t i) { return pair_value(from, to, offset + i); };
}

}  // namespace

// ---- collectives -----------------------------------------------------------------------------------

TEST_CASE("backend: broadcast from a non-zero root delivers the root's values of every dtype", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    for (const int root : roots_of(backend)) {
      for (const DType dtype : kAllDTypes) {
        INFO("root " << root << ", " << dtype_name(dtype));
        const Tensor tensor = make_tensor({kElements}, dtype, contributions_of(dtype, ReduceOp::Sum, backend.rank()));
        backend.broadcast(tensor, root)->wait();
        CHECK(first_mismatch(tensor, contributions_of(dtype, ReduceOp::Sum, root)).empty());
      }
    }
  });
}

TEST_CASE("backend: all_reduce combines every rank's values with every reduce op", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    for (const ReduceCase& c : reduce_cases()) {
      INFO(dtype_name(c.dtype) << " " << reduce_op_name(c.op));
      const Tensor tensor = make_tensor({kElements}, c.dtype, contributions_of(c.dtype, c.op, backend.rank()));
      backend.all_reduce(tensor, c.op)->wait();
      CHECK(first_mismatch(tensor, reduced_at(c.dtype, c.op, backend.size())) == "");
    }
  });
}

TEST_CASE("backend: reduce leaves the result on a non-zero root and the other ranks' tensors untouched",
          "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    const int root = backend.size() - 1;
    for (const ReduceCase& c : reduce_cases()) {
      INFO(dtype_name(c.dtype) << " " << reduce_op_name(c.op) << " to root " << root);
      const Tensor tensor = make_tensor({kElements}, c.dtype, contributions_of(c.dtype, c.op, backend.rank()));
      backend.reduce(tensor, root, c.op)->wait();
      const ValueAt expected = backend.rank() == root ? reduced_at(c.dtype, c.op, backend.size())
                                                      : contributions_of(c.dtype, c.op, backend.rank());
      CHECK(first_mismatch(tensor, expected) == "");
    }
  });
}

TEST_CASE("backend: reduce_scatter gives rank r block r reduced over every rank", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    for (const ReduceCase& c : reduce_cases()) {
      INFO(dtype_name(c.dtype) << " " << reduce_op_name(c.op));
      const Tensor input =
          make_tensor({backend.size(), kElements}, c.dtype, contributions_of(c.dtype, c.op, backend.rank()));
      const Tensor output = make_tensor({kElements}, c.dtype, [](std::int64_t) { return Value(1.0); });
      backend.reduce_scatter(output, input, c.op)->wait();
      CHECK(first_mismatch(output, reduced_at(c.dtype, c.op, backend.size(), backend.rank() * kElements)) == "");
    }
  });
}

TEST_CASE("backend: all_gather puts rank r's values in block r on every rank", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    for (const DType dtype : {DType::Float32, DType::Int64, DType::BFloat16, DType::Bool, DType::Complex128}) {
      INFO(dtype_name(dtype));
      const Tensor input = make_tensor({kElements}, dtype, contributions_of(dtype, ReduceOp::Sum, backend.rank()));
      const Tensor output = make_tensor({backend.size(), kElements}, dtype, [](std::int64_t) { return Value(7.0); });
      backend.all_gather(output, input)->wait();
      for (int r = 0; r < backend.size(); ++r) {
        INFO("block " << r);
        CHECK(first_mismatch(output.select(0, r), contributions_of(dtype, ReduceOp::Sum, r)) == "");
      }
    }
  });
}

TEST_CASE("backend: all_gather accepts an input that is already this rank's block of the output", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    const Tensor output = make_tensor({backend.size(), kElements}, DType::Int32,
                                      [&](std::int64_t i) { return pair_value(backend.rank(), 0, i % kElements); });
    backend.all_gather(output, output.select(0, backend.rank()))->wait();
    for (int r = 0; r < backend.size(); ++r) {
      INFO("block " << r);
      CHECK(first_mismatch(output.select(0, r), pair_values(r, 0)) == "");
    }
  });
}

TEST_CASE("backend: gather collects every rank's block on a non-zero root only", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    for (const int root : roots_of(backend)) {
      INFO("root " << root);
      const Tensor input = make_tensor({kElements}, DType::Float64, pair_values(backend.rank(), root));
      const bool is_root = backend.rank() == root;
      const Tensor output = is_root ? Tensor::zeros({backend.size(), kElements}, {DType::Float64}) : Tensor();
      backend.gather(output, input, root)->wait();
      if (!is_root) continue;
      for (int r = 0; r < backend.size(); ++r) {
        INFO("block " << r);
        CHECK(first_mismatch(output.select(0, r), pair_values(r, root)) == "");
      }
    }
  });
}

TEST_CASE("backend: scatter from a non-zero root gives rank r block r", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    for (const int root : roots_of(backend)) {
      INFO("root " << root);
      const bool is_root = backend.rank() == root;
      // Block r of the root's input names the root and its destination r.
      const Tensor input = is_root ? make_tensor({backend.size(), kElements}, DType::Int64,
                                                 [&](std::int64_t i) {
                                                   return pair_value(root, static_cast<int>(i / kElements),
                                                                     i % kElements);
                                                 })
                                   : Tensor();
      const Tensor output = make_tensor({kElements}, DType::Int64, [](std::int64_t) { return Value(-1.0); });
      backend.scatter(output, input, root)->wait();
      CHECK(first_mismatch(output, pair_values(root, backend.rank())) == "");
    }
  });
}

TEST_CASE("backend: all_to_all with uneven and empty blocks routes block r to rank r", "[mpi][backend]") {
  // Rank `from` sends (from + 2 to) % 3 * 3 elements to rank `to`: 0, 3 or 6 (above the lowered
  // max_count, and every count differs between some pair).
  auto count_between = [](int from, int to) { return static_cast<std::int64_t>((from + 2 * to) % 3 * 3); };
  Fixture().for_each_backend([&](detail::Engine& backend) {
    const int me = backend.rank();
    std::vector<std::int64_t> input_counts;
    std::vector<std::int64_t> output_counts;
    std::vector<Value> input_values;
    for (int peer = 0; peer < backend.size(); ++peer) {
      input_counts.push_back(count_between(me, peer));
      output_counts.push_back(count_between(peer, me));
      for (std::int64_t i = 0; i < input_counts.back(); ++i) input_values.push_back(pair_value(me, peer, i));
    }
    const auto total = [](const std::vector<std::int64_t>& counts) {
      return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    };
    const Tensor input = make_tensor({total(input_counts)}, DType::Float32,
                                     [&](std::int64_t i) { return input_values[static_cast<std::size_t>(i)]; });
    const Tensor output = make_tensor({total(output_counts)}, DType::Float32, [](std::int64_t) { return Value(-1.0); });
    backend.all_to_all(output, input, output_counts, input_counts)->wait();
    std::int64_t offset = 0;
    for (int peer = 0; peer < backend.size(); ++peer) {
      INFO("block from rank " << peer);
      const std::int64_t count = output_counts[static_cast<std::size_t>(peer)];
      CHECK(first_mismatch(output.narrow(0, offset, count), pair_values(peer, me)) == "");
      offset += count;
    }
  });
}

TEST_CASE("backend: barrier completes on every member", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    const WorkPtr work = backend.barrier();
    work->wait();
    CHECK(work->is_completed());
  });
}

// ---- point to point ----------------------------------------------------------------------------------

TEST_CASE("backend: send and recv around a ring deliver the left neighbour's values", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    const int size = backend.size();
    const int me = backend.rank();
    const int right = (me + 1) % size;
    const int left = (me + size - 1) % size;
    const Tensor sent = make_tensor({kElements}, DType::Float16, pair_values(me, right));
    const Tensor received = make_tensor({kElements}, DType::Float16, [](std::int64_t) { return Value(-2.0); });
    // Posted receive first, waited for first: neither call blocks the other.
    const WorkPtr receiving = backend.recv(received, left, 5);
    const WorkPtr sending = backend.send(sent, right, 5);
    receiving->wait();
    sending->wait();
    CHECK(first_mismatch(received, pair_values(left, me)) == "");
  });
}

TEST_CASE("backend: batch_p2p exchanges a tensor with every other rank in one Work", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    const int me = backend.rank();
    std::vector<P2POp> ops;
    std::vector<Tensor> received(static_cast<std::size_t>(backend.size()));
    for (int peer = 0; peer < backend.size(); ++peer) {
      if (peer == me) continue;
      received[static_cast<std::size_t>(peer)] =
          make_tensor({2, 7}, DType::Int32, [](std::int64_t) { return Value(-3.0); });
      ops.push_back({P2POp::Kind::Recv, received[static_cast<std::size_t>(peer)], peer, 9});
      ops.push_back({P2POp::Kind::Send, make_tensor({2, 7}, DType::Int32, pair_values(me, peer)), peer, 9});
    }
    backend.batch_p2p(ops)->wait();
    for (int peer = 0; peer < backend.size(); ++peer) {
      if (peer == me) continue;
      INFO("from rank " << peer);
      CHECK(first_mismatch(received[static_cast<std::size_t>(peer)], pair_values(peer, me)) == "");
    }
  });
}

TEST_CASE("backend: a receive from any source reports the rank whose values arrived", "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    const int receiver = backend.size() - 1;
    const int me = backend.rank();
    // The backends of one group share its communicator: the barrier keeps the next backend's
    // messages out of this one's receives.
    const auto in_step = [&] { backend.barrier()->wait(); };
    if (me != receiver) {
      backend.send(make_tensor({kElements}, DType::Int64, pair_values(me, receiver)), receiver, 11)->wait();
      in_step();
      return;
    }
    std::set<int> sources;
    for (int message = 0; message + 1 < backend.size(); ++message) {
      const Tensor received = make_tensor({kElements}, DType::Int64, [](std::int64_t) { return Value(-4.0); });
      const WorkPtr work = backend.recv(received, kAnySource, 11);
      work->wait();
      const int source = work->source_rank();
      INFO("message " << message << " from rank " << source);
      CHECK(source != receiver);
      CHECK(first_mismatch(received, pair_values(source, receiver)) == "");
      sources.insert(source);
    }
    CHECK(static_cast<int>(sources.size()) == backend.size() - 1);
    in_step();
  });
}

TEST_CASE("backend: source_rank of a receive from a named rank or of a collective is NotSupported",
          "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    const int me = backend.rank();
    const int size = backend.size();
    const Tensor received = Tensor::zeros({3}, {DType::Int16});
    const WorkPtr receiving = backend.recv(received, (me + size - 1) % size, 13);
    backend.send(make_tensor({3}, DType::Int16, pair_values(me, 2)), (me + 1) % size, 13)->wait();
    receiving->wait();
    CHECK_THROWS_AS(receiving->source_rank(), NotSupported);
    const WorkPtr barrier = backend.barrier();
    barrier->wait();
    CHECK_THROWS_AS(barrier->source_rank(), NotSupported);
  });
}

TEST_CASE("backend: a message shorter than the receiving tensor is an InvalidArgument on wait", "[mpi][backend]") {
  const Fixture fixture;
  detail::Engine& world = fixture.world();
  if (world.rank() == 0) {
    world.send(make_tensor({7}, DType::Float32, pair_values(0, 1)), 1, 77)->wait();
  } else if (world.rank() == 1) {
    const Tensor received = Tensor::zeros({9}, {DType::Float32});
    const WorkPtr work = world.recv(received, 0, 77);
    CHECK_THROWS_WITH(work->wait(), Catch::Contains("received 7 elements from rank 0") &&
                                        Catch::Contains("tensor of 9 elements"));
    CHECK_THROWS_AS(work->wait(), InvalidArgument);
  }
}

TEST_CASE("backend: a message longer than the receiving tensor is InvalidArgument, as a shorter one is",
          "[mpi][backend]") {
  const Fixture fixture;
  detail::Engine& world = fixture.world();
  const int sender = world.size() - 1;
  if (world.rank() == sender) {
    world.send(make_tensor({9}, DType::Float32, pair_values(sender, 0)), 0, 78)->wait();
  } else if (world.rank() == 0) {
    const WorkPtr work = world.recv(Tensor::zeros({7}, {DType::Float32}), sender, 78);
    CHECK_THROWS_AS(work->wait(), InvalidArgument);
    // MPI knows only that the message was longer; the shared-memory transport's frame says by how much.
    CHECK_THROWS_WITH(work->wait(), (Catch::Contains("rank 0 received a message longer than the receiving tensor") &&
                                     Catch::Contains("MPI_ERR_TRUNCATE")) ||
                                        Catch::Contains("rank 0 received 9 elements from rank " +
                                                        std::to_string(sender) + " (tag 78) into a tensor of 7"));
  }
}

TEST_CASE("backend: the staging decorator moves CUDA tensors through pinned host memory", "[mpi][backend][cuda]") {
  const int devices = cuda_device_count();
  if (devices == 0) return;  // nothing to stage from without a GPU
  const Fixture fixture;
  const DistributedContext& context = fixture.context();
  const Device device = context.device();
  detail::StagedBackend staged(engine_of(context.world()));
  const int me = staged.rank();
  const int size = staged.size();
  const int root = size - 1;

  const Tensor summed =
      make_tensor({kElements}, DType::Float32, contributions_of(DType::Float32, ReduceOp::Sum, me)).to(device);
  staged.all_reduce(summed, ReduceOp::Sum)->wait();
  CHECK(first_mismatch(summed.to(Device::cpu()), reduced_at(DType::Float32, ReduceOp::Sum, size)) == "");

  const Tensor broadcast = make_tensor({kElements}, DType::Int64, pair_values(me, 0)).to(device);
  staged.broadcast(broadcast, root)->wait();
  CHECK(first_mismatch(broadcast.to(Device::cpu()), pair_values(root, 0)) == "");

  const Tensor gathered = Tensor::zeros({size, kElements}, {DType::BFloat16, device});
  staged.all_gather(gathered, make_tensor({kElements}, DType::BFloat16, pair_values(me, 1)).to(device))->wait();
  const Tensor gathered_on_host = gathered.to(Device::cpu());
  for (int r = 0; r < size; ++r) CHECK(first_mismatch(gathered_on_host.select(0, r), pair_values(r, 1)) == "");
}

// ---- asynchronous completion -------------------------------------------------------------------------

TEST_CASE("backend: several operations in flight complete when waited for in reverse order", "[mpi][backend][async]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    const int me = backend.rank();
    const int size = backend.size();
    const int root = size - 1;
    const Tensor summed = make_tensor({kElements}, DType::Float64, contributions_of(DType::Float64, ReduceOp::Sum, me));
    const Tensor broadcast = make_tensor({kElements}, DType::Int32, pair_values(me, 0));
    const Tensor gathered = Tensor::zeros({size, kElements}, {DType::Int64});
    const Tensor gathered_input = make_tensor({kElements}, DType::Int64, pair_values(me, 1));
    const Tensor received = Tensor::zeros({kElements}, {DType::UInt8});
    const int left = (me + size - 1) % size;

    std::vector<WorkPtr> works;
    works.push_back(backend.recv(received, left, 21));
    works.push_back(backend.all_reduce(summed, ReduceOp::Max));
    works.push_back(backend.broadcast(broadcast, root));
    works.push_back(backend.all_gather(gathered, gathered_input));
    works.push_back(backend.barrier());
    works.push_back(backend.send(make_tensor({kElements}, DType::UInt8, pair_values(me % 2, 0)), (me + 1) % size, 21));
    for (auto work = works.rbegin(); work != works.rend(); ++work) (*work)->wait();
    for (const WorkPtr& work : works) CHECK(work->is_completed());

    CHECK(first_mismatch(summed, reduced_at(DType::Float64, ReduceOp::Max, size)) == "");
    CHECK(first_mismatch(broadcast, pair_values(root, 0)) == "");
    for (int r = 0; r < size; ++r) CHECK(first_mismatch(gathered.select(0, r), pair_values(r, 1)) == "");
    CHECK(first_mismatch(received, pair_values(left % 2, 0)) == "");
  });
}

TEST_CASE("backend: wait with a timeout on a receive nobody sends throws Timeout, and the Work can be dropped",
          "[mpi][backend][async]") {
  const Fixture fixture;
  detail::Engine& world = fixture.world();
  const Tensor never_filled = make_tensor({kElements}, DType::Float32, [](std::int64_t) { return Value(5.0); });
  {
    const WorkPtr work = world.recv(never_filled, (world.rank() + 1) % world.size(), 4242);
    CHECK_FALSE(work->is_completed());
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(work->wait(100ms), Timeout);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(elapsed >= 100ms);
    CHECK(elapsed < 30s);  // generous: proves only that the wait gave up
    CHECK_FALSE(work->is_completed());
  }  // dropping the Work cancels the receive instead of waiting for a message that never comes
  CHECK(first_mismatch(never_filled, [](std::int64_t) { return Value(5.0); }) == "");
  world.barrier()->wait();
}

// ---- what MPI cannot do, and arguments that would overrun a buffer ------------------------------------

TEST_CASE("backend: reductions MPI cannot perform are NotSupported, naming dtype and op", "[mpi][backend]") {
  struct Unsupported {
    DType dtype;
    ReduceOp op;
  };
  const std::vector<Unsupported> cases = {
      {DType::Float32, ReduceOp::BitwiseAnd}, {DType::Float64, ReduceOp::BitwiseXor},
      {DType::Float16, ReduceOp::BitwiseOr},  {DType::Float8_e5m2, ReduceOp::BitwiseAnd},
      {DType::Complex64, ReduceOp::Min},      {DType::Complex128, ReduceOp::Max},
      {DType::Bool, ReduceOp::Avg},
  };
  Fixture().for_each_backend([&](detail::Engine& backend) {
    for (const Unsupported& c : cases) {
      const std::string dtype(dtype_name(c.dtype));
      const std::string op(reduce_op_name(c.op));
      INFO(dtype << " " << op);
      const Tensor tensor = Tensor::full({3}, 1.0, {c.dtype});
      const Tensor blocks = Tensor::full({backend.size() * 3}, 1.0, {c.dtype});
      CHECK_THROWS_AS(backend.all_reduce(tensor, c.op), NotSupported);
      CHECK_THROWS_WITH(backend.all_reduce(tensor, c.op), Catch::Contains(dtype) && Catch::Contains(op));
      CHECK_THROWS_AS(backend.reduce(tensor, backend.size() - 1, c.op), NotSupported);
      CHECK_THROWS_AS(backend.reduce_scatter(tensor, blocks, c.op), NotSupported);
    }
  });
}

TEST_CASE("backend: arguments that would overrun a buffer are InvalidArgument before anything is sent",
          "[mpi][backend]") {
  Fixture().for_each_backend([](detail::Engine& backend) {
    const int size = backend.size();
    const Tensor input = Tensor::full({4}, 2.0, {DType::Float32});
    CHECK_THROWS_AS(backend.all_gather(Tensor::zeros({size * 4 + 1}, {DType::Float32}), input), InvalidArgument);
    CHECK_THROWS_AS(backend.all_gather(Tensor::zeros({size * 4}, {DType::Int32}), input), InvalidArgument);
    CHECK_THROWS_AS(backend.reduce_scatter(input, Tensor::zeros({size * 4 - 1}, {DType::Float32}), ReduceOp::Sum),
                    InvalidArgument);
    CHECK_THROWS_AS(backend.broadcast(input, size), InvalidArgument);
    CHECK_THROWS_AS(backend.send(input, size, 0), InvalidArgument);
    CHECK_THROWS_AS(backend.recv(input, 0, -5), InvalidArgument);
    const std::vector<std::int64_t> wrong_counts(static_cast<std::size_t>(size + 1), 1);
    CHECK_THROWS_AS(backend.all_to_all(input, input, wrong_counts, wrong_counts), InvalidArgument);
  });
  // The staging decorator packs any layout; MPI itself takes contiguous host memory only.
  const Fixture fixture;
  detail::Engine& world = fixture.world();
  CHECK_THROWS_WITH(world.broadcast(Tensor::full({2, 2}, 2.0).transpose(0, 1), 0), Catch::Contains("not contiguous"));
}

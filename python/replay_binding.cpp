#include "replay_binding.hpp"

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "conversions.hpp"
#include "tensortree/error.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tree_binding.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

// What TorchRL's sampler objects say, as a handle's ReplayOpenOptions and (prioritized) the
// buffer's priorities. One C++ type; each Python class is a constructor of it.
struct Sampler {
  SamplerKind kind = SamplerKind::Uniform;
  std::int64_t max_capacity = 0;  // Prioritized: the rows the priorities cover (the capacity)
  double alpha = 0.6;
  double beta = 0.4;
  double eps = 1e-8;
  std::int64_t slice_len = 0;
  std::string traj_key = "trajectory";

  std::string describe() const {
    switch (kind) {
      case SamplerKind::Uniform: return "RandomSampler()";
      case SamplerKind::Prioritized:
        return "PrioritizedSampler(max_capacity=" + std::to_string(max_capacity) + ", alpha=" + std::to_string(alpha) +
               ", beta=" + std::to_string(beta) + ")";
      case SamplerKind::Slice: return "SliceSampler(slice_len=" + std::to_string(slice_len) + ", traj_key='" + traj_key + "')";
      case SamplerKind::WithoutReplacement: return "SamplerWithoutReplacement()";
      case SamplerKind::Fifo: return "FifoSampler()";
    }
    return "Sampler()";
  }
};

ReplayOpenOptions open_options(const Sampler& sampler, double timeout, std::uint64_t seed) {
  return {.sampler = sampler.kind,
          .beta = sampler.beta,
          .slice_length = sampler.slice_len,
          .trajectory_key = parse_path(sampler.traj_key),
          .seed = seed,
          .timeout = milliseconds_from(timeout, "ReplayBuffer timeout")};
}

// A ReplayBuffer handle that Python threads may share: the library's handle is for one thread at a
// time, so its calls take a lock, after the GIL is released (a caller waiting for the lock never
// holds the GIL).
class PyReplayBuffer {
 public:
  PyReplayBuffer(ReplayBuffer buffer, Sampler sampler) : buffer_(std::move(buffer)), sampler_(std::move(sampler)) {}

  void extend(const py::handle& rows) {
    const TensorTree tree = tree_from_python(rows, py::none());
    py::gil_scoped_release unlocked;
    const std::lock_guard lock(mutex_);
    buffer_.extend(tree);
  }

  // The rows with "index" (int64) and, when prioritized, "_weight" (float32), as TorchRL's
  // TensorDictReplayBuffer returns them.
  TensorTree sample(std::int64_t batch_size, const std::string& device) {
    ReplaySample drawn;
    {
      py::gil_scoped_release unlocked;
      const std::lock_guard lock(mutex_);
      drawn = buffer_.sample(batch_size, {.device = Device::parse(device)});
    }
    const auto n = static_cast<std::int64_t>(drawn.indices.size());
    Tensor index = Tensor::empty({n}, {DType::Int64});
    std::copy(drawn.indices.begin(), drawn.indices.end(), index.data<std::int64_t>());
    drawn.batch.set("index", device == "cpu" ? index : index.to(Device::parse(device)));
    if (!drawn.weights.empty()) {
      Tensor weight = Tensor::empty({n}, {DType::Float32});
      std::copy(drawn.weights.begin(), drawn.weights.end(), weight.data<float>());
      drawn.batch.set("_weight", device == "cpu" ? weight : weight.to(Device::parse(device)));
    }
    return std::move(drawn.batch);
  }

  void update_priority(const py::handle& index, const py::handle& priority) {
    const Tensor rows = column_from(index, DType::Int64);
    const Tensor values = column_from(priority, DType::Float64);
    if (rows.numel() != values.numel()) {
      throw InvalidArgument("update_priority: " + std::to_string(rows.numel()) + " indices but " +
                            std::to_string(values.numel()) + " priorities");
    }
    py::gil_scoped_release unlocked;
    const std::lock_guard lock(mutex_);
    buffer_.update_priority({rows.data<std::int64_t>(), static_cast<std::size_t>(rows.numel())},
                            {values.data<double>(), static_cast<std::size_t>(values.numel())});
  }

  CheckpointInfo checkpoint(const std::filesystem::path& target, bool durable) {
    py::gil_scoped_release unlocked;
    const std::lock_guard lock(mutex_);
    return buffer_.checkpoint(target, {.durable = durable});
  }

  // Calls that read shared counters need no lock.
  const ReplayBuffer& buffer() const { return buffer_; }
  const Sampler& sampler() const { return sampler_; }
  TensorTree storage() {
    const std::lock_guard lock(mutex_);
    return buffer_.storage();
  }

 private:
  ReplayBuffer buffer_;
  Sampler sampler_;
  std::mutex mutex_;
};

std::unique_ptr<PyReplayBuffer> create(const std::string& name, std::optional<std::int64_t> capacity, const Sampler& sampler,
                      const RateLimiterOptions& rate_limiter, double timeout, std::uint64_t seed) {
  if (!capacity && sampler.max_capacity == 0) {
    throw InvalidArgument("ReplayBuffer.create: give capacity= (or a PrioritizedSampler's max_capacity)");
  }
  if (capacity && sampler.max_capacity != 0 && *capacity != sampler.max_capacity) {
    throw InvalidArgument("ReplayBuffer.create: capacity " + std::to_string(*capacity) + " but the sampler's " +
                          "max_capacity is " + std::to_string(sampler.max_capacity) + "; the priorities cover the ring");
  }
  const ReplayBufferOptions options{.capacity = capacity.value_or(sampler.max_capacity),
                                    .prioritized = sampler.kind == SamplerKind::Prioritized,
                                    .alpha = sampler.alpha,
                                    .eps = sampler.eps,
                                    .rate_limiter = rate_limiter};
  const ReplayOpenOptions handle = open_options(sampler, timeout, seed);
  const std::filesystem::path place = replay_place(name);
  py::gil_scoped_release unlocked;
  return std::make_unique<PyReplayBuffer>(ReplayBuffer::create(place, options, handle), sampler);
}

std::unique_ptr<PyReplayBuffer> open(const std::string& name, const Sampler& sampler, double timeout, std::uint64_t seed) {
  const ReplayOpenOptions handle = open_options(sampler, timeout, seed);
  const std::filesystem::path place = replay_place(name);
  py::gil_scoped_release unlocked;
  return std::make_unique<PyReplayBuffer>(ReplayBuffer::open(place, handle), sampler);
}

// A Python subclass of Sampler (a C++ type of its own) whose constructor takes no argument.
template <class Subclass>
void bind_plain_sampler(py::module_& module, const char* name, SamplerKind kind, const char* doc) {
  py::class_<Subclass, Sampler>(module, name, doc).def(py::init([kind] {
    Subclass sampler;
    sampler.kind = kind;
    return sampler;
  }));
}

void bind_samplers(py::module_& module) {
  py::class_<Sampler>(module, "Sampler", "How sample() draws rows; construct one of its subclasses.")
      .def_readonly("alpha", &Sampler::alpha)
      .def_readonly("beta", &Sampler::beta)
      .def("__repr__", &Sampler::describe);
  struct RandomSampler : Sampler {};
  bind_plain_sampler<RandomSampler>(module, "RandomSampler", SamplerKind::Uniform,
                                    "Every row equally likely, with replacement.");
  struct PrioritizedSampler : Sampler {};
  py::class_<PrioritizedSampler, Sampler>(
      module, "PrioritizedSampler",
      "P(i) = p_i^alpha / sum_k p_k^alpha, importance weights (p_i / min_k p_k)^-beta in sample()['_weight'] "
      "(TorchRL's PrioritizedSampler; max_capacity is the buffer's capacity).")
      .def(py::init([](std::int64_t max_capacity, double alpha, double beta, double eps) {
             PrioritizedSampler sampler;
             sampler.kind = SamplerKind::Prioritized;
             sampler.max_capacity = max_capacity;
             sampler.alpha = alpha;
             sampler.beta = beta;
             sampler.eps = eps;
             return sampler;
           }),
           py::arg("max_capacity"), py::arg("alpha") = 0.6, py::arg("beta") = 0.4, py::arg("eps") = 1e-8);
  struct SliceSampler : Sampler {};
  py::class_<SliceSampler, Sampler>(module, "SliceSampler",
                                    "Runs of slice_len consecutive steps of one trajectory, the trajectory "
                                    "named by the integer leaf traj_key (TorchRL's SliceSampler).")
      .def(py::init([](std::int64_t slice_len, const std::string& traj_key) {
             SliceSampler sampler;
             sampler.kind = SamplerKind::Slice;
             sampler.slice_len = slice_len;
             sampler.traj_key = traj_key;
             return sampler;
           }),
           py::kw_only(), py::arg("slice_len"), py::arg("traj_key") = "trajectory");
  struct SamplerWithoutReplacement : Sampler {};
  bind_plain_sampler<SamplerWithoutReplacement>(module, "SamplerWithoutReplacement", SamplerKind::WithoutReplacement,
                                                "Every row once before any twice, for this handle (drop_last=False).");
  struct FifoSampler : Sampler {};
  bind_plain_sampler<FifoSampler>(module, "FifoSampler", SamplerKind::Fifo,
                                  "A queue every handle shares: each row once, oldest first, to one sampler.");
}

void bind_rate_limiter(py::module_& module) {
  constexpr double kUnlimited = std::numeric_limits<double>::infinity();
  py::class_<RateLimiterOptions>(module, "RateLimiter",
                                 "Reverb's rate limiter over the buffer's shared insert and sample counts.")
      .def(py::init([](double samples_per_insert, std::int64_t min_size_to_sample, double min_diff, double max_diff) {
             return RateLimiterOptions{samples_per_insert, min_size_to_sample, min_diff, max_diff};
           }),
           py::kw_only(), py::arg("samples_per_insert") = 1.0, py::arg("min_size_to_sample") = 0,
           py::arg("min_diff") = -kUnlimited, py::arg("max_diff") = kUnlimited)
      .def_static("min_size", &RateLimiterOptions::min_size, py::arg("min_size"),
                  "Samples wait until min_size rows were inserted (Reverb's MinSize).")
      .def_static("sample_to_insert_ratio", &RateLimiterOptions::sample_to_insert_ratio,
                  py::arg("samples_per_insert"), py::arg("min_size"), py::arg("error_buffer"),
                  "About samples_per_insert rows sampled per row inserted (Reverb's SampleToInsertRatio).")
      .def_readonly("samples_per_insert", &RateLimiterOptions::samples_per_insert)
      .def_readonly("min_size_to_sample", &RateLimiterOptions::min_size_to_sample)
      .def_readonly("min_diff", &RateLimiterOptions::min_diff)
      .def_readonly("max_diff", &RateLimiterOptions::max_diff);
}

}  // namespace

void bind_replay(py::module_& module) {
  bind_samplers(module);
  bind_rate_limiter(module);
  py::class_<CheckpointInfo>(module, "CheckpointInfo", "What a checkpoint holds: the counts it noted and its rows.")
      .def_readonly("inserted", &CheckpointInfo::inserted)
      .def_readonly("sampled", &CheckpointInfo::sampled)
      .def_readonly("rows", &CheckpointInfo::rows);
  py::class_<PyReplayBuffer>(
      module, "ReplayBuffer",
      "A ring of rows that processes on this node share by name, without a server. A plain name lives in "
      "/dev/shm (shared_memory_path), a name with a '/' is a directory. Threads may share one.")
      .def_static("create", &create, py::arg("name"), py::arg("capacity") = py::none(),
                  py::arg("sampler") = Sampler{}, py::arg("rate_limiter") = RateLimiterOptions{},
                  py::arg("timeout") = 10.0, py::arg("seed") = 0,
                  "Creates the buffer (once, by the learner); the first extend fixes the rows' layout.")
      .def_static("open", &open, py::arg("name"), py::arg("sampler") = Sampler{}, py::arg("timeout") = 10.0,
                  py::arg("seed") = 0, "Opens a buffer another process created.")
      .def_static("shared_memory_path", &ReplayBuffer::shared_memory_path, py::arg("name"))
      .def("extend", &PyReplayBuffer::extend, py::arg("rows"),
           "Appends rows: a TensorTree of batch_size [k] or a dict of arrays of k rows (no copy before the "
           "buffer's own). Waits for the rate limiter, at most the timeout.")
      .def("sample", &PyReplayBuffer::sample, py::arg("batch_size"), py::arg("device") = "cpu",
           "batch_size rows drawn by the sampler, one consolidated tree with 'index' (and '_weight' when "
           "prioritized). An empty buffer waits the handle's timeout, then raises Timeout.")
      .def("update_priority", &PyReplayBuffer::update_priority, py::arg("index"), py::arg("priority"))
      .def("checkpoint", &PyReplayBuffer::checkpoint, py::arg("path"), py::arg("durable") = true)
      .def("__len__", [](const PyReplayBuffer& rb) { return rb.buffer().size(); })
      .def_property_readonly("write_count", [](const PyReplayBuffer& rb) { return rb.buffer().inserted(); },
                             "Rows written so far by every process (TorchRL's write_count).")
      .def_property_readonly("sample_count", [](const PyReplayBuffer& rb) { return rb.buffer().sampled(); })
      .def_property_readonly("capacity", [](const PyReplayBuffer& rb) { return rb.buffer().capacity(); })
      .def_property_readonly("sampler", &PyReplayBuffer::sampler)
      .def_property_readonly("storage", &PyReplayBuffer::storage,
                             "The ring itself, leaves of batch_size [capacity] viewing the mapped files.")
      .def_property_readonly("path", [](const PyReplayBuffer& rb) { return rb.buffer().directory(); });
}

}  // namespace tensortree::python

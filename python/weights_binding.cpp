#include "weights_binding.hpp"

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <optional>
#include <string>
#include <utility>

#include "conversions.hpp"
#include "tensortree/error.hpp"
#include "tensortree/policy_version.hpp"
#include "tensortree/weights.hpp"
#include "tree_binding.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

// The lease's tree while it is held; InvalidArgument once released, so that a view taken inside the
// with-block is the only thing that outlives it.
const TensorTree& held_tree(const WeightLease& lease) {
  if (!lease.held()) throw InvalidArgument("this weight lease was released (use it inside its with-block)");
  return lease.tree();
}

WeightPublisher make_publisher(std::string name, std::uint32_t slots, std::optional<std::string> device, double timeout,
                               bool replace, bool unlink_on_close) {
  WeightPublisherOptions options{.slots = slots,
                                 .device = device ? std::optional<Device>(Device::parse(*device)) : std::nullopt,
                                 .timeout = milliseconds_from(timeout, "WeightPublisher timeout"),
                                 .replace = replace,
                                 .unlink_on_close = unlink_on_close};
  return WeightPublisher(std::move(name), options);
}

std::uint64_t publish(WeightPublisher& publisher, const py::handle& params, std::optional<std::uint64_t> version) {
  const TensorTree tree = params_from_python(params);
  py::gil_scoped_release unlocked;
  return version ? publisher.publish(tree, *version) : publisher.publish(tree);
}

WeightSubscriber make_subscriber(std::string name, double timeout) {
  const WeightSubscriberOptions options{.timeout = milliseconds_from(timeout, "WeightSubscriber timeout")};
  py::gil_scoped_release unlocked;
  return WeightSubscriber(std::move(name), options);
}

void bind_lease(py::module_& module) {
  py::class_<WeightLease>(module, "WeightLease",
                          "One version held: `with subscriber.latest() as weights:` reads weights.version and "
                          "weights['policy.weight'] or weights.to_dict(), torch views of the shared slot (read-only "
                          "memory: writing one faults). The slot stays untouched until the block ends.")
      .def("__enter__", [](WeightLease& lease) -> WeightLease& { return lease; },
           py::return_value_policy::reference_internal)
      .def("__exit__", [](WeightLease& lease, const py::args&) { lease.release(); })
      .def_property_readonly("version", &WeightLease::version)
      .def_property_readonly("held", &WeightLease::held)
      .def_property_readonly("tree", &held_tree, py::return_value_policy::reference_internal)
      .def("__getitem__", [](const WeightLease& lease, const py::object& key) {
        return py::cast(held_tree(lease), py::return_value_policy::reference).attr("__getitem__")(key);
      })
      .def("to_dict", [](const WeightLease& lease) { return tree_to_dict(held_tree(lease)); })
      .def("intact", &WeightLease::intact, "The slot still holds this version (false only if tampered with).")
      .def("release", &WeightLease::release);
}

void bind_policy_version(py::module_& module) {
  module.attr("POLICY_VERSION_KEY") = kPolicyVersionKey;
  module.def("stamp_policy_version",
             [](TensorTree& trajectory, std::int64_t version, const std::string& key) {
               stamp_policy_version(trajectory, version, parse_path(key));
             },
             py::arg("trajectory"), py::arg("version"), py::arg("key") = kPolicyVersionKey,
             "Sets leaf `key` to an int64 tensor of the batch size holding `version` everywhere.");
  py::class_<PolicyLag>(module, "PolicyLag", "The policy lag drop_stale_rows saw in one batch.")
      .def_readonly("rows", &PolicyLag::rows)
      .def_readonly("dropped", &PolicyLag::dropped)
      .def_readonly("max_lag", &PolicyLag::max_lag)
      .def_readonly("mean_lag", &PolicyLag::mean_lag);
  module.def("drop_stale_rows",
             [](const TensorTree& batch, std::int64_t current_version, std::int64_t max_lag, const std::string& key) {
               FreshRows fresh = drop_stale_rows(batch, current_version, max_lag, parse_path(key));
               return std::make_pair(std::move(fresh.rows), fresh.lag);
             },
             py::arg("batch"), py::arg("current_version"), py::arg("max_lag"), py::arg("key") = kPolicyVersionKey,
             "(rows whose policy lag is at most max_lag, PolicyLag): Sample Factory's max_policy_lag.");
}

}  // namespace

void bind_weights(py::module_& module) {
  bind_lease(module);
  py::class_<WeightPublisher>(module, "WeightPublisher",
                              "The learner's side of a weight publication: a plain name lives in /dev/shm "
                              "(shared_memory_path), a name with a '/' is a file path.")
      .def(py::init(&make_publisher), py::arg("name"), py::arg("slots") = 3, py::arg("device") = py::none(),
           py::arg("timeout") = 10.0, py::arg("replace") = false, py::arg("unlink_on_close") = true)
      .def("publish", &publish, py::arg("params"), py::arg("version") = py::none(),
           "Copies params (a TensorTree, or a dict of arrays: batch size []) into a free slot and makes it the "
           "newest version; returns its number.")
      .def_property_readonly("version", &WeightPublisher::version)
      .def_property_readonly("path", &WeightPublisher::path)
      .def_static("shared_memory_path", &WeightPublisher::shared_memory_path, py::arg("name"));
  py::class_<WeightSubscriber>(module, "WeightSubscriber", "An actor's side: opens the publication by name.")
      .def(py::init(&make_subscriber), py::arg("name"), py::arg("timeout") = 10.0)
      .def("latest", &WeightSubscriber::latest, py::call_guard<py::gil_scoped_release>(),
           "The newest complete version, held until the with-block (or release()) ends.")
      .def_property_readonly("latest_version", &WeightSubscriber::latest_version)
      .def("copy_into", &WeightSubscriber::copy_into, py::arg("params"), py::call_guard<py::gil_scoped_release>(),
           "The newest version copied into params' own leaves; returns its version.")
      .def("latest_copy", &WeightSubscriber::latest_copy, py::call_guard<py::gil_scoped_release>(),
           "(version, a fresh tree holding a copy of it).");
  bind_policy_version(module);
}

}  // namespace tensortree::python

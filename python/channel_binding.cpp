#include "channel_binding.hpp"

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <optional>
#include <string>
#include <utility>

#include "conversions.hpp"
#include "tensortree/channel_credential.hpp"
#include "tensortree/channel_set.hpp"
#include "tensortree/channel_weights.hpp"
#include "tensortree/tree_channel.hpp"
#include "tree_binding.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

// `open(address, options)` (TreeChannel::connect, TreeListener::bind) taking the options as Python
// keywords, with the GIL released while it waits.
template <class Result>
auto with_options(Result (*open)(const std::string&, const ChannelOptions&)) {
  return [open](const std::string& address, double timeout, std::uint64_t max_tree_bytes,
                std::optional<ChannelCredential> credential, bool plain_loopback, std::uint64_t max_trees_in_flight,
                std::uint64_t max_bytes_in_flight) {
    const ChannelOptions options{.credential = std::move(credential),
                                 .plain_loopback = plain_loopback,
                                 .timeout = milliseconds_from(timeout, "channel timeout"),
                                 .max_tree_bytes = max_tree_bytes,
                                 .max_trees_in_flight = max_trees_in_flight,
                                 .max_bytes_in_flight = max_bytes_in_flight};
    py::gil_scoped_release unlocked;
    return open(address, options);
  };
}

// Binds with_options(open) as the static method `name` of `cls`: the address, then the options
// as keywords with ChannelOptions' defaults.
template <class Class, class Result, class Address>
void def_opener(Class& cls, const char* name, Result (*open)(const std::string&, const ChannelOptions&),
                Address address, const char* doc) {
  const ChannelOptions defaults;
  cls.def_static(name, with_options(open), address, py::arg("timeout") = 5.0,
                 py::arg("max_tree_bytes") = defaults.max_tree_bytes, py::arg("credential") = py::none(),
                 py::arg("plain_loopback") = false, py::arg("max_trees_in_flight") = defaults.max_trees_in_flight,
                 py::arg("max_bytes_in_flight") = defaults.max_bytes_in_flight, doc);
}

// `call(channel, tree)` on a tree given as a TensorTree or a dict (its batch size inferred), with
// the GIL released while the channel works.
template <class Call>
auto with_tree(Call call) {
  return [call](TreeChannel& channel, const py::handle& source) {
    const TensorTree tree = tree_from_python(source, py::none());
    py::gil_scoped_release unlocked;
    call(channel, tree);
  };
}

void bind_credential(py::module_& module) {
  module.attr("CHANNEL_KEY_VARIABLE") = kChannelKeyVariable;
  py::class_<ChannelCredential>(module, "ChannelCredential",
                                "The job's channel credential (one CURVE key pair): the learner makes it, actors are "
                                "given its secret_text in TENSORTREE_CHANNEL_KEY or a key file of mode 0600.")
      .def_static("generate", &ChannelCredential::generate)
      .def_static("from_text", &ChannelCredential::from_text, py::arg("secret_text"))
      .def_static("from_environment", &ChannelCredential::from_environment)
      .def_static("from_file", &ChannelCredential::from_file, py::arg("path"))
      .def("save", &ChannelCredential::save, py::arg("path"))
      .def_property_readonly("secret_text", &ChannelCredential::secret_text)
      .def_property_readonly("public_text", &ChannelCredential::public_text)
      .def("__repr__", [](const ChannelCredential& key) { return "ChannelCredential(public " + key.public_text() + ")"; });
}

void bind_channel(py::module_& module) {
  py::class_<ChannelStats>(module, "ChannelStats", "What a channel moved, counted per message.")
      .def_readonly("schemas_sent", &ChannelStats::schemas_sent)
      .def_readonly("trees_sent", &ChannelStats::trees_sent)
      .def_readonly("keepalives_sent", &ChannelStats::keepalives_sent)
      .def_readonly("schemas_received", &ChannelStats::schemas_received)
      .def_readonly("trees_received", &ChannelStats::trees_received)
      .def_readonly("keepalives_received", &ChannelStats::keepalives_received);
  py::class_<TreeChannel> channel_class(module, "TreeChannel",
                                        "Whole trees to and from one peer process, any node; its failures are its "
                                        "own (PeerLost, Timeout, CorruptData, SchemaMismatch), and a peer's close "
                                        "ends it with ChannelClosed after everything it sent.");
  def_opener(channel_class, "connect", &TreeChannel::connect, py::arg("address"),
             "A channel to the listener at address, with the job's credential (default: TENSORTREE_CHANNEL_KEY); "
             "max_trees_in_flight and max_bytes_in_flight are the credit this end grants its peer.");
  channel_class
      .def("send", with_tree([](TreeChannel& channel, const TensorTree& tree) { channel.send(tree); }), py::arg("tree"))
      .def("post", with_tree([](TreeChannel& channel, const TensorTree& tree) { channel.post(tree); }), py::arg("tree"),
           "Sends without waiting; a newer post replaces one not yet on its way.")
      .def("flush",
           [](TreeChannel& channel, double wait) {
             const auto bound = milliseconds_from(wait, "flush wait");
             py::gil_scoped_release unlocked;
             return channel.flush(bound);
           },
           py::arg("wait") = 0.0)
      .def("keepalive", &TreeChannel::keepalive, py::call_guard<py::gil_scoped_release>())
      .def("recv", &TreeChannel::recv, py::call_guard<py::gil_scoped_release>())
      .def("try_recv",
           [](TreeChannel& channel, double wait) {
             const auto bound = milliseconds_from(wait, "try_recv wait");
             py::gil_scoped_release unlocked;
             return channel.try_recv(bound);
           },
           py::arg("wait") = 0.0, "The next tree, or None when none arrived within `wait` seconds.")
      .def("recv_into", &TreeChannel::recv_into, py::arg("tree"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("is_open", &TreeChannel::is_open)
      .def("close", &TreeChannel::close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("peer", &TreeChannel::peer)
      .def_property_readonly("stats", &TreeChannel::stats);
  py::class_<TreeListener> listener_class(module, "TreeListener", "Where a learner accepts actors' channels.");
  def_opener(listener_class, "bind", &TreeListener::bind, py::arg("address") = ":0",
             "Listens on address; only peers holding the job's credential (default: TENSORTREE_CHANNEL_KEY) get in; "
             "max_trees_in_flight and max_bytes_in_flight are the credit it grants each actor.");
  listener_class
      .def_property_readonly("address", &TreeListener::address)
      .def("accept",
           [](TreeListener& listener, double wait) {
             const auto bound = milliseconds_from(wait, "accept wait");
             py::gil_scoped_release unlocked;
             return listener.accept(bound);
           },
           py::arg("wait") = 0.0, "The next channel an actor opened, or None.");
}

void bind_channel_weights(py::module_& module) {
  py::class_<ChannelWeightPublisher>(module, "ChannelWeightPublisher",
                                     "Weight versions to actors over their channels, newest only.")
      .def(py::init<>())
      .def("publish",
           [](ChannelWeightPublisher& publisher, const py::handle& params, std::optional<std::uint64_t> version) {
             const TensorTree tree = params_from_python(params);
             py::gil_scoped_release unlocked;
             return version ? publisher.publish(tree, *version) : publisher.publish(tree);
           },
           py::arg("params"), py::arg("version") = py::none())
      .def_property_readonly("version", &ChannelWeightPublisher::version)
      .def("offer_to", py::overload_cast<TreeChannel&>(&ChannelWeightPublisher::offer_to, py::const_),
           py::arg("channel"), py::call_guard<py::gil_scoped_release>())
      .def("offer_to", py::overload_cast<ChannelSet&>(&ChannelWeightPublisher::offer_to, py::const_),
           py::arg("channels"), py::call_guard<py::gil_scoped_release>(),
           "Offers every channel of a ChannelSet the current version, when a version or a channel is new.");
  module.def("take_newest_weights",
             [](TreeChannel& channel, double wait) -> std::optional<std::pair<std::uint64_t, TensorTree>> {
               const auto bound = milliseconds_from(wait, "take_newest_weights wait");
               std::optional<ChannelWeights> newest;
               {
                 py::gil_scoped_release unlocked;
                 newest = take_newest_weights(channel, bound);
               }
               if (!newest) return std::nullopt;
               return std::make_pair(newest->version, std::move(newest->params));
             },
             py::arg("channel"), py::arg("wait") = 0.0, "(version, params) of the newest version that arrived, or None.");
}

}  // namespace

void bind_channels(py::module_& module) {
  bind_credential(module);
  bind_channel(module);
  bind_channel_weights(module);
}

}  // namespace tensortree::python

#include "channel_set_binding.hpp"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>

#include "conversions.hpp"
#include "errors.hpp"
#include "tensortree/channel_set.hpp"
#include "tensortree/reconnecting_channel.hpp"
#include "tree_binding.hpp"

namespace tensortree::python {

namespace py = pybind11;

namespace {

// What ChannelSet.next gives Python: the key, and the tree or the error that ended the channel.
struct PyChannelEvent {
  ChannelSet::Key key = 0;
  std::optional<TensorTree> tree;
  py::object ended = py::none();
};

// `call(channel, tree)` on the set's channel `key`, for a tree given as a TensorTree or a dict, with
// the GIL released while the channel works.
template <class Call>
auto on_channel(Call call) {
  return [call](ChannelSet& set, ChannelSet::Key key, const py::handle& source) {
    const TensorTree tree = tree_from_python(source, py::none());
    py::gil_scoped_release unlocked;
    call(set.channel(key), tree);
  };
}

void bind_set(py::module_& module) {
  py::class_<PyChannelEvent>(module, "ChannelEvent",
                             "A tree from the channel `key`, or its end: `ended` is the error (ChannelClosed after "
                             "everything it sent, PeerLost, Timeout, CorruptData, SchemaMismatch); it has left the set.")
      .def_readonly("key", &PyChannelEvent::key)
      .def_readonly("tree", &PyChannelEvent::tree)
      .def_readonly("ended", &PyChannelEvent::ended);
  py::class_<ChannelSet>(module, "ChannelSet",
                         "The channels of one listener, served from one readiness wait, one tree a turn each.")
      .def(py::init<>())
      .def("accept",
           [](ChannelSet& set, TreeListener& listener, double wait) -> std::optional<ChannelSet::Key> {
             const auto bound = milliseconds_from(wait, "accept wait");
             py::gil_scoped_release unlocked;
             std::optional<TreeChannel> accepted = listener.accept(bound);
             if (!accepted) return std::nullopt;
             return set.add(std::move(*accepted));
           },
           py::arg("listener"), py::arg("wait") = 0.0,
           "Accepts the next channel of `listener` into the set: its key, or None when none came within `wait`.")
      .def("next",
           [](ChannelSet& set, double wait) -> std::optional<PyChannelEvent> {
             const auto bound = milliseconds_from(wait, "next wait");
             std::optional<ChannelSet::Event> event;
             {
               py::gil_scoped_release unlocked;
               event = set.next(bound);
             }
             if (!event) return std::nullopt;
             PyChannelEvent result{event->key, std::move(event->tree)};
             if (event->ended) result.ended = error_object(event->ended);
             return result;
           },
           py::arg("wait") = 0.0, "The next tree or channel end, waiting at most `wait` seconds; None when none came.")
      .def("send", on_channel([](TreeChannel& channel, const TensorTree& tree) { channel.send(tree); }),
           py::arg("key"), py::arg("tree"))
      .def("post", on_channel([](TreeChannel& channel, const TensorTree& tree) { channel.post(tree); }),
           py::arg("key"), py::arg("tree"))
      .def("peer", [](ChannelSet& set, ChannelSet::Key key) { return set.channel(key).peer(); }, py::arg("key"))
      .def("remove", &ChannelSet::remove, py::arg("key"), "Takes the channel out of the set and gives it back.")
      .def("__contains__", &ChannelSet::contains)
      .def("__len__", &ChannelSet::size)
      .def_property_readonly("added", &ChannelSet::added);
}

void bind_reconnecting(py::module_& module) {
  py::class_<ReconnectStats>(module, "ReconnectStats", "What a ReconnectingChannel did.")
      .def_readonly("connections", &ReconnectStats::connections)
      .def_readonly("losses", &ReconnectStats::losses)
      .def_readonly("trees_sent", &ReconnectStats::trees_sent)
      .def_readonly("trees_dropped", &ReconnectStats::trees_dropped)
      .def_readonly("trees_kept", &ReconnectStats::trees_kept);
  const ReconnectOptions defaults;
  py::class_<ReconnectingChannel>(module, "ReconnectingChannel",
                                  "An actor's channel that outlives its learner: keeps its newest trees while none "
                                  "listens and connects again, with backoff, to the learner back at the address.")
      .def(py::init([](const std::string& address, double timeout, std::optional<ChannelCredential> credential,
                       bool plain_loopback, std::size_t max_kept_trees, double first_retry, double max_retry,
                       double connect_wait) {
             ReconnectOptions options{.channel = {.credential = std::move(credential),
                                                  .plain_loopback = plain_loopback,
                                                  .timeout = milliseconds_from(timeout, "channel timeout")},
                                      .max_kept_trees = max_kept_trees,
                                      .first_retry = milliseconds_from(first_retry, "first_retry"),
                                      .max_retry = milliseconds_from(max_retry, "max_retry"),
                                      .connect_wait = milliseconds_from(connect_wait, "connect_wait")};
             py::gil_scoped_release unlocked;
             return ReconnectingChannel(address, options);
           }),
           py::arg("address"), py::arg("timeout") = 5.0, py::arg("credential") = py::none(),
           py::arg("plain_loopback") = false, py::arg("max_kept_trees") = defaults.max_kept_trees,
           py::arg("first_retry") = 0.05, py::arg("max_retry") = 0.5, py::arg("connect_wait") = 1.0)
      .def("send",
           [](ReconnectingChannel& channel, const py::handle& source) {
             const TensorTree tree = tree_from_python(source, py::none());
             py::gil_scoped_release unlocked;
             channel.send(tree);
           },
           py::arg("tree"), "Sends the tree, or keeps a copy while no learner listens.")
      .def("take_newest_weights",
           [](ReconnectingChannel& channel, double wait) -> std::optional<std::pair<std::uint64_t, TensorTree>> {
             const auto bound = milliseconds_from(wait, "take_newest_weights wait");
             std::optional<ChannelWeights> newest;
             {
               py::gil_scoped_release unlocked;
               newest = channel.take_newest_weights(bound);
             }
             if (!newest) return std::nullopt;
             return std::make_pair(newest->version, std::move(newest->params));
           },
           py::arg("wait") = 0.0, "(version, params) of the newest version that arrived, or None: act with the last.")
      .def("progress", &ReconnectingChannel::progress, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("connected", &ReconnectingChannel::connected)
      .def_property_readonly("stats", &ReconnectingChannel::stats)
      .def_property_readonly("address", &ReconnectingChannel::address);
}

}  // namespace

void bind_channel_set(py::module_& module) {
  bind_set(module);
  bind_reconnecting(module);
}

}  // namespace tensortree::python

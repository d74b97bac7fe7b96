#include "transport/zeromq/zeromq_auth.hpp"

#include <array>
#include <vector>

#include "tensortree/error.hpp"

namespace tensortree::zeromq {

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr int kPollMilliseconds = 50;  // how soon the handler sees that it should stop

std::string decoded_key(const std::string& z85) {
  std::array<std::uint8_t, 32> key{};
  if (zmq_z85_decode(key.data(), z85.c_str()) == nullptr) throw InvalidArgument("channel credential: a malformed key");
  return {reinterpret_cast<const char*>(key.data()), key.size()};
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context, const std::string& admitted_public_z85)
    : socket_(context, zmq::socket_type::rep), admitted_(decoded_key(admitted_public_z85)) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind(kZapEndpoint);
  thread_ = std::thread([this] { serve(); });
}

ZapHandler::~ZapHandler() {
  stop_ = true;
  thread_.join();
}

void ZapHandler::serve() {
  while (!stop_) {
    std::array<zmq::pollitem_t, 1> items{{{socket_.handle(), 0, ZMQ_POLLIN, 0}}};
    if (zmq::poll(items.data(), items.size(), std::chrono::milliseconds(kPollMilliseconds)) > 0) answer();
  }
}

// A request is version, request id, domain, address, routing id, mechanism, then the mechanism's
// credentials (CURVE: the client's public key, 32 bytes). Anything malformed is refused.
void ZapHandler::answer() {
  std::vector<zmq::message_t> request;
  do {
    request.emplace_back();
    if (!socket_.recv(request.back(), zmq::recv_flags::none)) return;
  } while (request.back().more() && request.size() < 16);
  const bool admitted = request.size() == 7 && request[0].to_string_view() == "1.0" &&
                        request[5].to_string_view() == "CURVE" && request[6].to_string_view() == admitted_;
  if (!admitted) ++refused_;
  const std::string request_id = request.size() > 1 ? request[1].to_string() : "";
  socket_.send(zmq::buffer(std::string_view("1.0")), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(std::string_view(admitted ? "200" : "400")), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(std::string_view(admitted ? "OK" : "not the job's credential")), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(std::string_view(admitted ? "actor" : "")), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(std::string_view("")), zmq::send_flags::none);
}

}  // namespace tensortree::zeromq

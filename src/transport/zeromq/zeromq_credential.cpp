#include "tensortree/channel_credential.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <utility>

#include <zmq.h>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

namespace {

constexpr std::size_t kZ85KeyLength = 40;

}  // namespace

ChannelCredential ChannelCredential::generate() {
  std::array<char, kZ85KeyLength + 1> public_key{};
  std::array<char, kZ85KeyLength + 1> secret_key{};
  if (zmq_curve_keypair(public_key.data(), secret_key.data()) != 0) {
    throw NotSupported(fmt::format("channel credential: this ZeroMQ has no CURVE ({})", zmq_strerror(zmq_errno())));
  }
  return ChannelCredential(secret_key.data(), public_key.data());
}

ChannelCredential ChannelCredential::from_text(std::string_view secret_z85) {
  while (!secret_z85.empty() && (secret_z85.back() == '\n' || secret_z85.back() == '\r')) secret_z85.remove_suffix(1);
  if (secret_z85.size() != kZ85KeyLength) {
    throw InvalidArgument(fmt::format("channel credential: a key is {} characters of Z85 text, not {}", kZ85KeyLength,
                                      secret_z85.size()));
  }
  const std::string secret(secret_z85);
  std::array<char, kZ85KeyLength + 1> public_key{};
  if (zmq_curve_public(public_key.data(), secret.c_str()) != 0) {
    throw InvalidArgument("channel credential: the key is not Z85 text (a key made by generate() or save())");
  }
  return ChannelCredential(secret, public_key.data());
}

ChannelCredential ChannelCredential::from_environment() {
  const char* text = std::getenv(kChannelKeyVariable);
  if (text == nullptr || *text == '\0') {
    throw InvalidArgument(fmt::format("channel credential: {} is not set (the learner's key: give actors the "
                                      "learner's key file or variable)", kChannelKeyVariable));
  }
  return from_text(text);
}

ChannelCredential ChannelCredential::from_file(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    throw InvalidArgument(fmt::format("channel credential: cannot read the key file {}", path.string()));
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw InvalidArgument(fmt::format("channel credential: the key file {} may be read by others (mode {:o}); "
                                      "chmod 600 it", path.string(), info.st_mode & 0777));
  }
  std::ifstream file(path);
  std::string text;
  std::getline(file, text);
  return from_text(text);
}

void ChannelCredential::save(const std::filesystem::path& path) const {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw InvalidArgument(fmt::format("channel credential: cannot create the key file {} (it must not exist)",
                                      path.string()));
  }
  const std::string line = secret_ + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) throw InvalidArgument(fmt::format("channel credential: cannot write the key file {}", path.string()));
}

}  // namespace tensortree

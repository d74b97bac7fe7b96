// The job's credential for tree channels: one CURVE key pair. The learner's listener uses it as its
// server key pair and admits only peers that prove they hold the same secret key, inside the
// handshake and before any byte of theirs reaches the channel; actors use it as their client key
// pair. Every channel with a credential is encrypted. Its text is the secret key in Z85 (40
// characters): the learner makes one (generate, save to a key file of mode 0600) and actors are
// given it in the variable TENSORTREE_CHANNEL_KEY or the key file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "tensortree/export.hpp"

namespace tensortree {

// The variable actors (and ChannelOptions' default) read the credential from.
inline constexpr const char* kChannelKeyVariable = "TENSORTREE_CHANNEL_KEY";

class TT_API ChannelCredential {
 public:
  // A new random key pair (libsodium's generator, through ZeroMQ). NotSupported in a build without
  // ZeroMQ.
  static ChannelCredential generate();
  // From the secret key's Z85 text (a trailing newline is ignored); InvalidArgument naming what is
  // wrong, never echoing the text.
  static ChannelCredential from_text(std::string_view secret_z85);
  // From TENSORTREE_CHANNEL_KEY; InvalidArgument when it is unset or malformed.
  static ChannelCredential from_environment();
  // From a key file written by save(); InvalidArgument when it is missing, readable by group or
  // others, or malformed.
  static ChannelCredential from_file(const std::filesystem::path& path);
  // Writes the secret's text to a new file of mode 0600 (an existing file is refused, never replaced).
  void save(const std::filesystem::path& path) const;

  // The secret key's text: what TENSORTREE_CHANNEL_KEY holds.
  const std::string& secret_text() const { return secret_; }
  // The public key's text (derived from the secret).
  const std::string& public_text() const { return public_; }

 private:
  ChannelCredential(std::string secret, std::string public_key)
      : secret_(std::move(secret)), public_(std::move(public_key)) {}
  std::string secret_;  // Z85, 40 characters
  std::string public_;  // Z85, 40 characters
};

}  // namespace tensortree

// A channel test process is one job: its credential is made once, before main, and put in
// TENSORTREE_CHANNEL_KEY, where its channels (ChannelOptions' default) and the actor processes it
// starts (which inherit the variable) find it.
#include <cstdlib>

#include "tensortree/channel_credential.hpp"

namespace {

const bool job_credential_set = [] {
  if (std::getenv(tensortree::kChannelKeyVariable) == nullptr) {
    ::setenv(tensortree::kChannelKeyVariable, tensortree::ChannelCredential::generate().secret_text().c_str(), 1);
  }
  return true;
}();

}  // namespace

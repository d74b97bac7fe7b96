#include "tensortree/device.hpp"

#include <charconv>
#include <string>

#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "tensortree/config.hpp"
#include "tensortree/error.hpp"

namespace tensortree {

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda();
  constexpr std::string_view prefix = "cuda:";
  if (text.starts_with(prefix)) {
    const std::string_view digits = text.substr(prefix.size());
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && !digits.empty()) {
      return cuda(index);
    }
  }
  throw InvalidArgument(fmt::format("cannot parse device '{}' (expected \"cpu\", \"cuda\" or \"cuda:<index>\")", text));
}

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return index_ < 0 ? "cuda" : "cuda:" + std::to_string(index_);
}

std::ostream& operator<<(std::ostream& os, Device device) { return os << device.str(); }

int cuda_device_count() { return cuda::device_count(); }

Device resolve_device(Device device) {
  if (device.is_cpu()) return Device::cpu();
  const int count = cuda::device_count();
  if (count == 0) {
    throw NotSupported(fmt::format("cannot use {}: {}", device,
                                   TT_HAVE_CUDA ? "no CUDA device is present" : "tensortree was built without CUDA"));
  }
  if (device.index() == -1) return Device::cuda(cuda::current_device());
  if (device.index() < 0 || device.index() >= count) {
    throw InvalidArgument(fmt::format("no CUDA device {} ({} present)", device.index(), count));
  }
  return device;
}

std::string build_features() {
  auto yes_no = [](bool on) { return on ? "yes" : "no"; };
  return fmt::format("cuda={} nccl={} mpi={} ucx={} zeromq={}", yes_no(TT_HAVE_CUDA), yes_no(TT_HAVE_NCCL),
                     yes_no(TT_HAVE_MPI), yes_no(TT_HAVE_UCX), yes_no(TT_HAVE_ZEROMQ));
}

}  // namespace tensortree

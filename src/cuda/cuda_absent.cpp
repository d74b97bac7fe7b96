// The CUDA seam when the library is built without CUDA: no devices, and any attempt to use one
// fails with NotSupported instead of a link error.
#include "core/cuda_api.hpp"
#include "core/text_format.hpp"
#include "tensortree/error.hpp"

namespace tensortree::cuda {

namespace {

[[noreturn]] void built_without_cuda(const char* what) {
  throw NotSupported(fmt::format("{}: tensortree was built without CUDA", what));
}

}  // namespace

int device_count() noexcept { return 0; }
int current_device() { built_without_cuda("current_device"); }
void set_device(int) { built_without_cuda("set_device"); }
std::array<std::byte, 16> device_uuid(int) { built_without_cuda("device_uuid"); }
void* alloc_device(std::size_t, int) { built_without_cuda("device memory"); }
void free_device(void*, int) noexcept {}
void* alloc_pinned(std::size_t) { built_without_cuda("pinned host memory"); }
void free_pinned(void*) noexcept {}
void copy_bytes(void*, const void*, std::size_t) { built_without_cuda("device copies"); }
void elementwise_binary(detail::BinaryOp, DType, const detail::StridedView&, const detail::StridedView&,
                        const detail::StridedView&, int) {
  built_without_cuda("element-wise kernels");
}
void elementwise_scalar(detail::BinaryOp, DType, const detail::StridedView&, const detail::StridedView&, double,
                        bool, int) {
  built_without_cuda("element-wise kernels");
}
void elementwise_unary(detail::UnaryOp, DType, const detail::StridedView&, const detail::StridedView&, double,
                       double, int) {
  built_without_cuda("element-wise kernels");
}
void convert(const detail::StridedView&, DType, const detail::StridedView&, DType, int) {
  built_without_cuda("element-wise kernels");
}
void copy_strided(const detail::StridedView&, const detail::StridedView&, std::size_t, int) {
  built_without_cuda("device copies");
}

CopyStream::CopyStream(int) { built_without_cuda("CUDA streams"); }
CopyStream::~CopyStream() = default;
void CopyStream::copy_async(void*, const void*, std::size_t) const { built_without_cuda("device copies"); }
void CopyStream::copy_rows_async(void*, std::size_t, const void*, std::size_t, std::size_t, std::size_t) const {
  built_without_cuda("device copies");
}
void CopyStream::wait() const {}
void CopyStream::wait_quietly() const noexcept {}
CopyEvent::CopyEvent(int) { built_without_cuda("CUDA events"); }
CopyEvent::~CopyEvent() = default;
void CopyEvent::record(const CopyStream&) { built_without_cuda("CUDA events"); }
bool CopyEvent::done() const { return true; }
void CopyEvent::wait() const {}
void CopyEvent::wait_quietly() const noexcept {}

void pack(detail::PackDirection, std::span<const detail::PackSegment>,
          std::span<const detail::StridedView>, std::byte*, std::uint64_t, int) {
  built_without_cuda("device packing");
}

std::shared_ptr<Work> pack_async(detail::PackDirection, std::span<const detail::PackSegment>,
                                 std::span<const detail::StridedView>, std::byte*, std::uint64_t, int,
                                 std::shared_ptr<const void>) {
  built_without_cuda("device packing");
}

}  // namespace tensortree::cuda

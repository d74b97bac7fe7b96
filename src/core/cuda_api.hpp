// The library's only window onto CUDA. Callers include this header, never the CUDA headers, so the
// library builds without CUDA: then cuda_absent.cpp implements it (no devices; allocations throw
// NotSupported).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/pack_plan.hpp"
#include "core/strided_view.hpp"

namespace tensortree::cuda {

int device_count() noexcept;
int current_device();
// Makes `device` the calling thread's current device.
void set_device(int device);
// The device's UUID: the same on every process that sees that GPU, whatever its index there.
std::array<std::byte, 16> device_uuid(int device);

void* alloc_device(std::size_t nbytes, int device);
void free_device(void* ptr, int device) noexcept;
void* alloc_pinned(std::size_t nbytes);
void free_pinned(void* ptr) noexcept;

// Synchronous copy between any two of host, pinned host and device memory (unified addressing).
void copy_bytes(void* dst, const void* src, std::size_t nbytes);

// Element-wise copy between two strided views of the same shape on one device, in one launch.
void copy_strided(const detail::StridedView& dst, const detail::StridedView& src,
                  std::size_t itemsize, int device);

// Moves every segment between the leaves and `buffer` (all on `device`) with one descriptor upload
// and one kernel launch; when packing, bytes between segments are zeroed. Synchronous.
void pack(detail::PackDirection direction, std::span<const detail::PackSegment> segments,
          std::span<const detail::StridedView> strided, std::byte* buffer, std::uint64_t total_bytes,
          int device);

}  // namespace tensortree::cuda

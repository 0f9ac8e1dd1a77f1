// The device-generic memory of a rank: caching allocator, pinned staging and the pool (device_memory_pool.hpp).
#include "optimus/core/device_memory_pool.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "optimus/core/error.hpp"

namespace optimus {

DeviceAllocator::DeviceAllocator(DeviceRuntime& device)
    : device_(&device),
      cache_(CachingAllocator::Raw{.allocate = [d = &device](std::size_t bytes) { return d->allocate(bytes); },
                                   .release = [d = &device](void* p) { d->release(p); },
                                   .describe_free = [d = &device] { return d->describe_free(); }},
             device.name()) {}

PinnedStaging::~PinnedStaging() {
  for (int b = 0; b < 2; ++b) {
    drained_[b].reset();
    if (buffers_[b] != nullptr) device_->release_pinned(buffers_[b]);
  }
}

void PinnedStaging::ensure_buffers() {
  for (int b = 0; b < 2; ++b) {
    if (buffers_[b] != nullptr) continue;
    buffers_[b] = device_->allocate_pinned(chunk_);
    ++allocations_;
    drained_[b] = device_->create_event();
  }
}

void PinnedStaging::copy(void* dst, const void* src, std::size_t bytes, DeviceStream& stream) {
  if (bytes == 0) return;
  const MemoryType to = device_->memory_type(dst), from = device_->memory_type(src);
  if (to == MemoryType::device && from == MemoryType::pageable) {
    stage_up(static_cast<char*>(dst), static_cast<const char*>(src), bytes, stream);
  } else if (from == MemoryType::device && to == MemoryType::pageable) {
    stage_down(static_cast<char*>(dst), static_cast<const char*>(src), bytes, stream);
  } else {
    device_->copy_async(dst, src, bytes, stream);
  }
  stream.synchronize();
}

// Up: fill a buffer once its previous DMA has drained, then send it; the host fills the other buffer meanwhile.
void PinnedStaging::stage_up(char* dst, const char* src, std::size_t bytes, DeviceStream& stream) {
  ensure_buffers();
  for (std::size_t offset = 0, c = 0; offset < bytes; offset += chunk_, ++c) {
    const std::size_t size = std::min(chunk_, bytes - offset), b = c % 2;
    drained_[b]->synchronize();
    std::memcpy(buffers_[b], src + offset, size);
    device_->copy_async(dst + offset, buffers_[b], size, stream);
    drained_[b]->record(stream);
  }
}

// Down: the DMA of chunk c+1 runs while the host copies chunk c out of its buffer.
void PinnedStaging::stage_down(char* dst, const char* src, std::size_t bytes, DeviceStream& stream) {
  ensure_buffers();
  const std::size_t chunks = (bytes + chunk_ - 1) / chunk_;
  auto extent = [&](std::size_t c) { return std::pair{c * chunk_, std::min(chunk_, bytes - c * chunk_)}; };
  auto fetch = [&](std::size_t c) {
    const auto [offset, size] = extent(c);
    device_->copy_async(buffers_[c % 2], src + offset, size, stream);
    drained_[c % 2]->record(stream);
  };
  fetch(0);
  for (std::size_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) fetch(c + 1);
    const auto [offset, size] = extent(c);
    drained_[c % 2]->synchronize();
    std::memcpy(dst + offset, buffers_[c % 2], size);
  }
}

void DeviceMemoryPool::release(void* p) noexcept {
  if (p == nullptr) return;
  // The pool is one rank's: nobody allocates between the release and the poisoning, which is queued in the stream's
  // order like every later use of the block.
  const std::size_t size = allocator_.release(p);
  if (size == 0) return;
  try {
    runtime().poison_async(p, size, *stream_);
  } catch (...) {  // NOLINT(bugprone-empty-catch): poisoning is a debugging aid; a failing stream reports its error
  }
}

void DeviceMemoryPool::zero(void* p, std::size_t bytes) { runtime().fill_async(p, 0, bytes, *stream_); }

void DeviceMemoryPool::copy(void* dst, const void* src, std::size_t bytes) { staging_.copy(dst, src, bytes, *stream_); }

}  // namespace optimus

// Page-locked host memory for tensors (pinned_memory.hpp).
#include "optimus/core/pinned_memory.hpp"

#include <cstring>
#include <exception>
#include <string>

namespace optimus {

void PinnedHostMemory::zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }

void PinnedHostMemory::copy(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

PinnedMemoryPool::PinnedMemoryPool(DeviceRuntime& device)
    : cache_(CachingAllocator::Raw{.allocate = [d = &device](std::size_t bytes) -> void* {
                                     try {
                                       return d->allocate_pinned(bytes);
                                     } catch (const std::exception&) {
                                       return nullptr;  // the cache empties itself and retries, then reports
                                     }
                                   },
                                   .release = [d = &device](void* p) { d->release_pinned(p); },
                                   .describe_free = [] { return std::string("page-locked host memory exhausted"); }},
             "page-locked host memory of " + device.name()) {}

void PinnedMemoryPool::zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }

void PinnedMemoryPool::copy(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

}  // namespace optimus

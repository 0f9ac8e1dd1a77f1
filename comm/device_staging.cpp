// The in-process staging area on an accelerator (optimus/comm/device_staging.hpp).
#include "optimus/comm/device_staging.hpp"

#include <vector>

#include "staged_reduce.hpp"

namespace optimus {

DeviceStaging::DeviceStaging(DeviceMemoryPool& memory)
    : pool_(std::make_shared<Pool>(memory.runtime())), memory_(&memory) {}

std::shared_ptr<std::byte> DeviceStaging::allocate(std::size_t bytes) {
  std::lock_guard lock(pool_->mu);
  const std::uint64_t raw = pool_->allocator.stats().raw_allocations;
  auto* p = static_cast<std::byte*>(pool_->allocator.allocate(bytes));
  if (pool_->allocator.stats().raw_allocations != raw) {
    // The pool ran out of this size: as many buffers again go to its cache. How many contributions are alive at once
    // depends on how far ranks run ahead of their readers; doubling reaches the high-water mark in a few steps.
    std::size_t& count = pool_->blocks[CachingAllocator::size_class(bytes)];
    std::vector<void*> spare(count);
    for (void*& q : spare) q = pool_->allocator.allocate(bytes);
    for (void* q : spare) pool_->allocator.release(q);
    count = 2 * count + 1;
  }
  // Released by whichever rank finishes with the contribution last; the pool lives as long as its buffers.
  return std::shared_ptr<std::byte>(p, [pool = pool_](std::byte* q) {
    std::lock_guard released(pool->mu);
    pool->allocator.release(q);
  });
}

void DeviceStaging::reduce(void* acc, const void* x, std::size_t count, DType dtype, ReduceOp op) {
  if (memory_->runtime().memory_type(acc) != MemoryType::device) {  // a host buffer (a scalar): reduce on the host
    std::vector<std::byte> staged(count * size_of(dtype));
    memory_->copy(staged.data(), x, staged.size());
    host_->reduce(acc, staged.data(), count, dtype, op);
    return;
  }
  detail::reduce_staged(acc, x, count, dtype, op, memory_->device(), ops::Queue{.stream = &memory_->stream()});
  memory_->stream().synchronize();
}

std::uint64_t DeviceStaging::raw_allocations() {
  std::lock_guard lock(pool_->mu);
  return pool_->allocator.stats().raw_allocations;
}

}  // namespace optimus

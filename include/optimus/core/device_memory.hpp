// Memory of one accelerator, as the owning Tensor sees it: where a tensor placed on a device gets its bytes.
// DeviceMemoryPool (optimus/core/device_memory_pool.hpp) implements it over any device runtime, the GPU's or the
// simulated device's. Copies take any direction (host or device pointers on either side).
#pragma once

#include <cstddef>

#include "optimus/core/tensor.hpp"  // Device

namespace optimus {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  virtual ~DeviceMemory() = default;

  virtual Device device() const = 0;
  // Throws optimus::Error naming the request and what is free when the device is out of memory.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  virtual void zero(void* p, std::size_t bytes) = 0;
  // Completes before returning (ordered after the device's work on its queue).
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
};

// Where memory from `memory` lives: its device, or the host when `memory` is null (host memory).
inline Device device_of(const DeviceMemory* memory) { return memory != nullptr ? memory->device() : Device::cpu; }

// Where a tensor of `tag` is counted: the host for host memory (pageable or page-locked), the device otherwise.
inline MemoryPlace place_of(const MemoryTag& tag) {
  return device_of(tag.device) == Device::cpu ? MemoryPlace::host : MemoryPlace::device;
}

// Copies `bytes` through `device` (any direction), or with memcpy when `device` is null (host memory).
void copy_bytes(DeviceMemory* device, void* dst, const void* src, std::size_t bytes);

}  // namespace optimus

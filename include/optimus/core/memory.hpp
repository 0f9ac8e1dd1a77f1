// Memory accounting: a MemoryTracker counts the current and peak bytes of the tensors attached to it, per
// kind (parameters, gradients, optimizer state, activations saved for backward, workspace). One tracker
// per rank, owned by the Grid; tensors that are not attached are not counted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace optimus {

enum class MemoryKind { parameters, gradients, optimizer, activations, workspace };
inline constexpr std::size_t kMemoryKinds = 5;

std::string_view name_of(MemoryKind kind);

class MemoryTracker {
 public:
  void allocate(MemoryKind kind, std::size_t bytes);
  void release(MemoryKind kind, std::size_t bytes) noexcept;

  std::uint64_t current(MemoryKind kind) const { return current_[index(kind)]; }
  std::uint64_t peak(MemoryKind kind) const { return peak_[index(kind)]; }
  std::uint64_t current_total() const { return current_total_; }
  std::uint64_t peak_total() const { return peak_total_; }
  // Peaks restart from the current values (e.g. to measure one training step).
  void reset_peaks();

 private:
  static std::size_t index(MemoryKind kind) { return static_cast<std::size_t>(kind); }
  std::array<std::uint64_t, kMemoryKinds> current_{};
  std::array<std::uint64_t, kMemoryKinds> peak_{};
  std::uint64_t current_total_ = 0;
  std::uint64_t peak_total_ = 0;
};

// Where a tensor's bytes are counted: a tracker (or none) and the kind.
class DeviceMemory;  // optimus/core/device_memory.hpp

// Who counts a tensor's bytes and as what, and where they live (null device: host memory).
struct MemoryTag {
  MemoryTracker* tracker = nullptr;
  MemoryKind kind = MemoryKind::workspace;
  DeviceMemory* device = nullptr;
};

}  // namespace optimus

// Memory accounting: a MemoryTracker counts the current and peak bytes of the tensors attached to it, per
// kind (parameters, gradients, optimizer state, activations saved for backward, workspace) and per place (device
// memory, or host memory: pageable or page-locked). One tracker per rank, owned by the Grid; tensors that are not
// attached are not counted. The calls without a place add both places up; a model on the CPU has only host bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace optimus {

enum class MemoryKind { parameters, gradients, optimizer, activations, workspace };
inline constexpr std::size_t kMemoryKinds = 5;
// Where counted bytes live: an accelerator's memory, or the host's.
enum class MemoryPlace { device, host };
inline constexpr std::size_t kMemoryPlaces = 2;

std::string_view name_of(MemoryKind kind);
std::string_view name_of(MemoryPlace place);

class MemoryTracker {
 public:
  void allocate(MemoryKind kind, MemoryPlace place, std::size_t bytes);
  void release(MemoryKind kind, MemoryPlace place, std::size_t bytes) noexcept;

  // Both places.
  std::uint64_t current(MemoryKind kind) const;
  std::uint64_t peak(MemoryKind kind) const;
  std::uint64_t current_total() const;
  std::uint64_t peak_total() const;
  // One place: the peak of a kind, and of all kinds together, in that place's memory.
  std::uint64_t current(MemoryKind kind, MemoryPlace place) const { return at(current_, kind, place); }
  std::uint64_t peak(MemoryKind kind, MemoryPlace place) const { return at(peak_, kind, place); }
  std::uint64_t current_total(MemoryPlace place) const { return totals_[index(place)]; }
  std::uint64_t peak_total(MemoryPlace place) const { return peak_totals_[index(place)]; }
  // Peaks restart from the current values (e.g. to measure one training step).
  void reset_peaks();

 private:
  using PerKind = std::array<std::array<std::uint64_t, kMemoryPlaces>, kMemoryKinds>;
  static std::size_t index(MemoryKind kind) { return static_cast<std::size_t>(kind); }
  static std::size_t index(MemoryPlace place) { return static_cast<std::size_t>(place); }
  static std::uint64_t at(const PerKind& a, MemoryKind kind, MemoryPlace place) { return a[index(kind)][index(place)]; }
  PerKind current_{};
  PerKind peak_{};
  std::array<std::uint64_t, kMemoryKinds> peak_both_{};  // the peak of a kind's bytes in both places together
  std::array<std::uint64_t, kMemoryPlaces> totals_{};
  std::array<std::uint64_t, kMemoryPlaces> peak_totals_{};
  std::uint64_t peak_total_ = 0;  // both places together
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

// MemoryTracker: current and peak bytes per kind.
#include "optimus/core/memory.hpp"

#include <algorithm>

namespace optimus {

std::string_view name_of(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::parameters: return "parameters";
    case MemoryKind::gradients: return "gradients";
    case MemoryKind::optimizer: return "optimizer";
    case MemoryKind::activations: return "activations";
    case MemoryKind::workspace: return "workspace";
  }
  return "?";
}

std::string_view name_of(MemoryPlace place) { return place == MemoryPlace::device ? "device" : "host"; }

void MemoryTracker::allocate(MemoryKind kind, MemoryPlace place, std::size_t bytes) {
  const std::size_t k = index(kind), w = index(place);
  current_[k][w] += bytes;
  totals_[w] += bytes;
  peak_[k][w] = std::max(peak_[k][w], current_[k][w]);
  peak_both_[k] = std::max(peak_both_[k], current(kind));
  peak_totals_[w] = std::max(peak_totals_[w], totals_[w]);
  peak_total_ = std::max(peak_total_, current_total());
}

void MemoryTracker::release(MemoryKind kind, MemoryPlace place, std::size_t bytes) noexcept {
  current_[index(kind)][index(place)] -= bytes;
  totals_[index(place)] -= bytes;
}

std::uint64_t MemoryTracker::current(MemoryKind kind) const {
  return current_[index(kind)][0] + current_[index(kind)][1];
}
std::uint64_t MemoryTracker::peak(MemoryKind kind) const { return peak_both_[index(kind)]; }
std::uint64_t MemoryTracker::current_total() const { return totals_[0] + totals_[1]; }
std::uint64_t MemoryTracker::peak_total() const { return peak_total_; }

void MemoryTracker::reset_peaks() {
  peak_ = current_;
  for (std::size_t k = 0; k < kMemoryKinds; ++k) peak_both_[k] = current_[k][0] + current_[k][1];
  peak_totals_ = totals_;
  peak_total_ = current_total();
}

}  // namespace optimus

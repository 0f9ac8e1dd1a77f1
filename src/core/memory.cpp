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

void MemoryTracker::allocate(MemoryKind kind, std::size_t bytes) {
  const std::size_t k = index(kind);
  current_[k] += bytes;
  current_total_ += bytes;
  peak_[k] = std::max(peak_[k], current_[k]);
  peak_total_ = std::max(peak_total_, current_total_);
}

void MemoryTracker::release(MemoryKind kind, std::size_t bytes) noexcept {
  current_[index(kind)] -= bytes;
  current_total_ -= bytes;
}

void MemoryTracker::reset_peaks() {
  peak_ = current_;
  peak_total_ = current_total_;
}

}  // namespace optimus

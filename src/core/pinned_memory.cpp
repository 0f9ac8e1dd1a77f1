// Page-locked host memory for tensors (pinned_memory.hpp).
#include "optimus/core/pinned_memory.hpp"

#include <cstring>

namespace optimus {

void PinnedHostMemory::zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }

void PinnedHostMemory::copy(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

}  // namespace optimus

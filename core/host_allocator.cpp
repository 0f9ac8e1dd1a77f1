// glibc's malloc parameters for a program whose steps free and reallocate the same tensors (host_allocator.hpp).
#include "optimus/core/host_allocator.hpp"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc (features.h)

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace optimus {

bool retain_freed_host_memory() {
#if defined(__GLIBC__)
  constexpr int kKeepFree = 1 << 30;  // free memory at the heap's top kept before trimming
  // No block mapped on its own (each would be unmapped when freed), one arena for every thread (a thread's arena
  // lives in 64 MiB heaps that are unmapped once empty), and freed memory kept for the next step.
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_ARENA_MAX, 1) == 1 && mallopt(M_TRIM_THRESHOLD, kKeepFree) == 1;
#else
  return false;
#endif
}

}  // namespace optimus

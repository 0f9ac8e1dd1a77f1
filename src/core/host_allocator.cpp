// glibc's malloc parameters for a program whose steps free and reallocate the same tensors (host_allocator.hpp).
#include "optimus/core/host_allocator.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace optimus {

bool retain_freed_host_memory() {
#if defined(__GLIBC__)
  constexpr int kLargestHeapBlock = 32 << 20;  // glibc's maximum for M_MMAP_THRESHOLD on 64-bit
  constexpr int kKeepFree = 1 << 30;           // free memory a heap keeps before trimming
  return mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock) == 1 && mallopt(M_TRIM_THRESHOLD, kKeepFree) == 1;
#else
  return false;
#endif
}

}  // namespace optimus

// optimus::OutOfMemory's message, written into its own buffer (no allocation: memory has run out).
#include "optimus/core/out_of_memory.hpp"

#include <sys/resource.h>

#include <cstdio>

namespace optimus {

OutOfMemory::OutOfMemory(std::size_t bytes) noexcept : bytes_(bytes) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const int n = std::snprintf(text_, sizeof text_, "out of memory: a request for %zu bytes (%.2f GiB) failed", bytes,
                              static_cast<double>(bytes) / kGiB);
  rlimit limit{};
  if (n > 0 && static_cast<std::size_t>(n) < sizeof text_ && ::getrlimit(RLIMIT_AS, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY) {
    std::snprintf(text_ + n, sizeof text_ - static_cast<std::size_t>(n),
                  " (this process's address space is limited to %.2f GiB: ulimit -v)",
                  static_cast<double>(limit.rlim_cur) / kGiB);
  }
}

}  // namespace optimus

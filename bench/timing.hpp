// Timing across ranks: each iteration is timed on every rank, the iteration's time is the maximum over
// ranks, and the reported time is the median of those maxima after the warm-up iterations.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "optimus/comm/communicator.hpp"

namespace optimus::bench {

// The median of `v` (its upper middle element for an even count; 0 when empty).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Fn>
double time_max_over_ranks(Communicator& comm, int warmup, int iters, Fn&& fn) {
  std::vector<double> seconds;
  for (int it = 0; it < warmup + iters; ++it) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double slowest = comm.all_reduce(local, ReduceOp::max);
    if (it >= warmup) seconds.push_back(slowest);
  }
  return median(std::move(seconds));
}

// Peak resident memory of this process in bytes (getrusage), the maximum over the ranks of `comm`.
double peak_rss_bytes_max(Communicator& comm);

}  // namespace optimus::bench

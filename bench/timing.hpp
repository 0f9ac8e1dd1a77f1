// Timing across ranks: each iteration is timed on every rank, the iteration's time is the maximum over
// ranks, and the reported time is the median of those maxima after the warm-up iterations.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "optimus/comm/communicator.hpp"

namespace optimus::bench {

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
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// Peak resident memory of this process in bytes (getrusage), the maximum over the ranks of `comm`.
double peak_rss_bytes_max(Communicator& comm);

}  // namespace optimus::bench

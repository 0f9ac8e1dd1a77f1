// The CPU GEMM's rate as a benchmark measures it, beside the processor's theoretical rate for the cores the
// measurement used: cores x the clock each ran at (measured right after its products, under the same load) x FLOPs
// per cycle (optimus/core/processor.hpp; f64: half of f32's).
#pragma once

#include <cstdint>

namespace optimus::bench {

struct Peak {
  double measured = 0;  // FLOP/s
  double hardware = 0;  // FLOP/s; 0 where not known (a GPU, not x86-64)
};

// The processor's theoretical rate in T (float or double) at `clock_hz` cycles per second (summed over the cores):
// the clock x f32 FLOPs per cycle of its vector units (f64: half); 0 where they are not known.
template <class T>
double theoretical_flops(double clock_hz);

// `threads` in-process threads each multiplying its own n^3 product of T (float or double) through the CPU GEMM
// backend at once: threads products over the slowest thread's time, the best of five rounds after one product each
// to warm up.
template <class T>
Peak concurrent_cpu_peak(int threads, std::int64_t n);

}  // namespace optimus::bench

// The CPU GEMM's measured and theoretical rates (cpu_peak.hpp).
#include "cpu_peak.hpp"

#include <algorithm>
#include <chrono>

#include "optimus/comm/in_process.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/processor.hpp"
#include "optimus/core/tensor.hpp"

namespace optimus::bench {

template <class T>
double theoretical_flops(double clock_hz) {
  return clock_hz * cpu::vector_units(cpu::this_processor()).f32_flops_per_cycle() * (sizeof(T) == 4 ? 1.0 : 0.5);
}

template <class T>
Peak concurrent_cpu_peak(int threads, std::int64_t n) {
  constexpr int kRounds = 5;
  double best = 0, clocks = 0;  // seconds of the fastest round (its slowest thread); the threads' clocks, summed
  run_in_process(threads, [&](Communicator& w) {
    Tensor<T> a(Shape{n, n}), b(Shape{n, n}), c(Shape{n, n});
    auto once = [&] { cpu::gemm<T>(Trans::no, Trans::no, T(1), a.view(), b.view(), T(0), c.view()); };
    once();
    double fastest = 0;
    for (int round = 0; round < kRounds; ++round) {
      w.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      once();
      const double slowest =
          w.all_reduce(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), ReduceOp::max);
      fastest = round == 0 ? slowest : std::min(fastest, slowest);
    }
    const double clock = w.all_reduce(cpu::measure_clock_hz(), ReduceOp::sum);
    if (w.rank() == 0) {
      best = fastest;
      clocks = clock;
    }
  });
  return {.measured = static_cast<double>(threads) * 2.0 * static_cast<double>(n * n * n) / best,
          .hardware = theoretical_flops<T>(clocks)};
}

template double theoretical_flops<float>(double);
template double theoretical_flops<double>(double);
template Peak concurrent_cpu_peak<float>(int, std::int64_t);
template Peak concurrent_cpu_peak<double>(int, std::int64_t);

}  // namespace optimus::bench

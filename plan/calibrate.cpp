// Measuring this machine's rates (calibrate.hpp).
#include "optimus/plan/calibrate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "optimus/comm/all_or_throw.hpp"
#include "optimus/core/blas_kernel.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/tensor.hpp"

namespace optimus::plan {
namespace {

// The median over `iters` (after one warm-up) of the slowest rank's seconds.
template <class Fn>
double seconds_of(Communicator& world, int iters, Fn&& fn) {
  std::vector<double> seconds;
  for (int it = 0; it <= iters; ++it) {
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double slowest = world.all_reduce(local, ReduceOp::max);
    if (it > 0) seconds.push_back(slowest);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// Every rank makes kCalls all-reduces of one double in a group of `size` ranks (the last group may be smaller), for
// each size 2, 4, .. up to the world's: the slowest rank's time over the calls' participants, the median over sizes.
double call_seconds(Communicator& world) {
  constexpr int kCalls = 200;
  std::vector<double> per_size;
  for (int size = 2; size <= world.size(); size *= 2) {
    const std::unique_ptr<Communicator> group = world.split(world.rank() / size, world.rank());
    double x = 1;
    group->all_reduce(&x, &x, 1, DType::f64, ReduceOp::sum);  // warm-up
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < kCalls; ++k) group->all_reduce(&x, &x, 1, DType::f64, ReduceOp::sum);
    const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double slowest = world.all_reduce(local, ReduceOp::max);
    const double participants = world.all_reduce(static_cast<double>(kCalls * group->size()), ReduceOp::sum);
    per_size.push_back(slowest / participants);
  }
  std::sort(per_size.begin(), per_size.end());
  return per_size[per_size.size() / 2];
}

}  // namespace

LinkFit fit_link(const std::vector<double>& bytes, const std::vector<double>& seconds) {
  OPTIMUS_CHECK(bytes.size() == seconds.size() && bytes.size() >= 2, "fit_link: ", bytes.size(), " sizes and ",
                seconds.size(), " times (two or more of each)");
  const auto n = static_cast<double>(bytes.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    OPTIMUS_CHECK(bytes[k] > 0 && std::isfinite(seconds[k]) && seconds[k] >= 0, "fit_link: ", bytes[k], " bytes in ",
                  seconds[k], " s is not a measurement");
    sx += bytes[k];
    sy += seconds[k];
    sxx += bytes[k] * bytes[k];
    sxy += bytes[k] * seconds[k];
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  if (!(slope > 0)) {  // not measurable (or the sizes are all one): the largest message's achieved cost per byte
    const std::size_t largest = static_cast<std::size_t>(
        std::max_element(bytes.begin(), bytes.end()) - bytes.begin());
    constexpr double kClockTick = 1e-9;  // steady_clock's resolution: a message never takes less
    return LinkFit{.alpha = 0, .beta = std::max(seconds[largest], kClockTick) / bytes[largest]};
  }
  return LinkFit{.alpha = std::max(0.0, (sy - slope * sx) / n), .beta = slope};
}

Calibration calibrate(Communicator& world, int iters) {
  OPTIMUS_CHECK(iters >= 1, "calibrate: ", iters, " repetitions");
  cpu::set_gemm_threads(1);
  prepare_gemm_together(world);  // before the products timed below: out of memory is an error, not a spin
  Calibration out{.ranks = world.size(), .backend = world.backend()};
  if (world.size() >= 2) {
    const std::vector<std::size_t> counts = {1u << 10, 1u << 13, 1u << 16, 1u << 19};  // floats
    std::vector<double> b_bytes, b_time, a_bytes, a_time;
    const auto p = static_cast<double>(world.size());
    for (std::size_t count : counts) {
      std::vector<float> buf(count, 1.0f);
      b_time.push_back(seconds_of(world, iters, [&] { world.broadcast(buf.data(), count, DType::f32, 0); }));
      b_bytes.push_back(static_cast<double>(count * 4));
      a_time.push_back(seconds_of(world, iters,
                                  [&] { world.all_reduce(buf.data(), buf.data(), count, DType::f32, ReduceOp::sum); }));
      a_bytes.push_back(2.0 * (p - 1) / p * static_cast<double>(count * 4));
    }
    const LinkFit bcast = fit_link(b_bytes, b_time), allreduce = fit_link(a_bytes, a_time);
    out.broadcast_alpha = bcast.alpha;
    out.broadcast_beta = bcast.beta;
    out.allreduce_alpha = allreduce.alpha;
    out.allreduce_beta = allreduce.beta;
    out.call_seconds = call_seconds(world);
  }
  const std::int64_t n = 1024;
  Tensor<float> x(Shape{n, n}), y(Shape{n, n}), z(Shape{n, n});
  const double gemm_s = seconds_of(world, iters, [&] {
    cpu::gemm<float>(cpu::Trans::no, cpu::Trans::no, 1.0f, x.view(), y.view(), 0.0f, z.view());
  });
  out.gemm_gflops = 2.0 * n * n * n / gemm_s / 1e9;
  const cpu::Processor processor = cpu::this_processor();
  out.clock_hz = world.all_reduce(cpu::measure_clock_hz(), ReduceOp::sum) / world.size();
  out.hardware_gflops = out.clock_hz * cpu::vector_units(processor).f32_flops_per_cycle() / 1e9;
  out.processor = cpu::describe(processor);
  out.gemm_kernel = cpu::describe(cpu::blas_kernel(), processor);
  const double elements = static_cast<double>(n * n);
  out.gelu_per_s = elements / seconds_of(world, iters, [&] { cpu::gelu_forward<float>(x.view(), z.view()); });
  out.axpby_per_s = elements / seconds_of(world, iters, [&] { cpu::axpby<float>(1.0f, z.view(), 0.5f, y.view()); });
  Tensor<float> m(Shape{n, n}), v(Shape{n, n});
  const AdamWStep step{
      .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = 1, .c1 = 0.1, .c2 = 0.05};
  out.adamw_per_s =
      elements / seconds_of(world, iters, [&] {
        ops::adamw_update<float>(x.view(), TensorView<const float>(y.view()), m.view(), v.view(), step, ops::Queue{});
      });
  return out;
}

std::string to_json(const Calibration& c) {
  const nlohmann::ordered_json doc{{"ranks", c.ranks},
                                   {"backend", c.backend},
                                   {"broadcast_alpha_s", c.broadcast_alpha},
                                   {"broadcast_beta_s_per_byte", c.broadcast_beta},
                                   {"allreduce_alpha_s", c.allreduce_alpha},
                                   {"allreduce_beta_s_per_byte", c.allreduce_beta},
                                   {"gemm_gflops_per_rank", c.gemm_gflops},
                                   {"hardware_gflops_per_rank", c.hardware_gflops},
                                   {"gemm_share_of_hardware", c.hardware_gflops > 0 ? c.gemm_gflops / c.hardware_gflops
                                                                                    : 0.0},
                                   {"clock_ghz", c.clock_hz / 1e9},
                                   {"processor", c.processor},
                                   {"gemm_kernel", c.gemm_kernel},
                                   {"gelu_elements_per_s", c.gelu_per_s},
                                   {"axpby_elements_per_s", c.axpby_per_s},
                                   {"adamw_parameters_per_s", c.adamw_per_s}};
  return doc.dump(2) + "\n";
}

Cluster cluster_of(const Calibration& c, int gpus, int cores, std::uint64_t memory_per_rank,
                   const std::string& source) {
  OPTIMUS_CHECK(c.broadcast_beta > 0 && c.gemm_gflops > 0 && c.gelu_per_s > 0 && c.axpby_per_s > 0 && c.adamw_per_s > 0,
                "calibration: broadcast beta ", c.broadcast_beta, " s/B, GEMM ", c.gemm_gflops, " GFLOP/s, GELU ",
                c.gelu_per_s, ", axpby ", c.axpby_per_s, " and AdamW ", c.adamw_per_s, " per second must be positive (",
                source, "), and communication is measured with 2 ranks or more");
  const Link measured{.bandwidth = 1.0 / c.broadcast_beta, .latency = c.broadcast_alpha};
  return Cluster{.gpus = gpus,
                 .gpus_per_node = gpus,
                 .device_memory = memory_per_rank,
                 .host_memory = memory_per_rank,
                 .has_device = false,
                 .intra = measured,
                 .inter = measured,
                 .gemm_flops = c.gemm_gflops * 1e9,
                 .element_rate = c.gelu_per_s,
                 .stream_rate = c.axpby_per_s,
                 .optimizer_rate = c.adamw_per_s,
                 .host_link = 0,
                 .overlap = 0,
                 .cores = cores,
                 .source = source + " (" + std::to_string(c.ranks) + " ranks measured; " + std::to_string(gpus) +
                           " ranks on " + std::to_string(cores) + " cores)"};
}

}  // namespace optimus::plan

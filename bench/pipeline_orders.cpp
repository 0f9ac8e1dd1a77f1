// optimus-bench pipeline's schedules by name and its footer of the simulated execution orders (pipeline_orders.hpp).
#include "pipeline_orders.hpp"

#include <cstdint>

#include "optimus/pipeline/simulator.hpp"
#include "report.hpp"

namespace optimus::bench {
namespace {
namespace pp = optimus::pipeline;
}  // namespace

pp::Schedule schedule_named(const std::string& name, int stages, int micro_batches, int chunks) {
  const pp::Kind kind = pp::parse_kind(name);
  const int v = kind == pp::Kind::interleaved || kind == pp::Kind::wave ? chunks : 1;
  return pp::make_schedule({.kind = kind, .stages = stages, .micro_batches = micro_batches, .chunks = v});
}

// The simulator alone at unit costs (F = 1, B = 2; split: 1 each) with `jitter`: for S = 2, 4, 8 and m = 2S (each
// schedule's rules allow), each schedule's mean step over 100 steps' draws, static and dynamic, and the ratio.
std::vector<std::string> simulated_orders(const std::vector<std::string>& names, int chunks, double jitter) {
  std::vector<std::string> out{format("the simulator alone, unit costs (F = 1, B = 2; zb: 1 each), --jitter %.2f, "
                                      "m = 2S, mean step over 100 steps' draws: static / dynamic (ratio)", jitter)};
  for (const std::string& name : names) {
    std::string line = format("  %-11s", name.c_str());
    for (const int stages : {2, 4, 8}) {
      const pp::Schedule s = schedule_named(name, stages, 2 * stages, chunks);
      const std::vector<pp::Costs> costs(static_cast<std::size_t>(s.virtual_stages()),
                                         pp::Costs{.forward = 1, .backward = 2});
      double fixed = 0, dynamic = 0;
      for (std::uint64_t step = 0; step < 100; ++step) {
        fixed += pp::simulate(s, costs, {.execution = {.order = pp::Order::static_order, .jitter = jitter}, .step = step})
                     .makespan;
        dynamic += pp::simulate(s, costs, {.execution = {.order = pp::Order::dynamic, .jitter = jitter}, .step = step})
                       .makespan;
      }
      line += format("  S=%d: %.2f / %.2f (%.3f)", stages, fixed / 100, dynamic / 100, dynamic / fixed);
    }
    out.push_back(line);
  }
  return out;
}

}  // namespace optimus::bench

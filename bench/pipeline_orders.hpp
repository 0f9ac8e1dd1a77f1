// optimus-bench pipeline's schedules by name, and its footer that compares the two execution orders
// (pipeline/dynamic_order.hpp) in the simulator alone.
#pragma once

#include <string>
#include <vector>

#include "optimus/pipeline/schedule.hpp"

namespace optimus::bench {

// The schedule `name` (--schedules' names) on `stages` stages in `micro_batches` micro-batches: `chunks` per stage
// for interleaved and the wave, 1 for the others.
pipeline::Schedule schedule_named(const std::string& name, int stages, int micro_batches, int chunks);

// The simulator alone at unit costs with `jitter`, for S = 2, 4, 8: a header line, then a line per schedule of `names`
// with its mean step static and dynamic and their ratio.
std::vector<std::string> simulated_orders(const std::vector<std::string>& names, int chunks, double jitter);

}  // namespace optimus::bench

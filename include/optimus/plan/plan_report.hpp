// optimus-plan's output: the assumptions as a '#' header, the best plans as fixed-width rows (time per step, memory
// per rank by kind on the device and the host, bytes per rank per link, bubble, the reason each ranks where it does),
// and the whole result as JSON.
#pragma once

#include <string>
#include <vector>

#include "optimus/plan/planner.hpp"

namespace optimus::plan {

// '#' lines: the workload, the cluster and every assumption of the models.
std::vector<std::string> assumptions(const Request& request);
// The header row, one row per plan (the first `rows` plans), and the first rejected layouts with their reasons.
std::vector<std::string> table(const Result& result, std::size_t rows);
// The request, the counts and every plan, as JSON text.
std::string to_json(const Request& request, const Result& result);

}  // namespace optimus::plan

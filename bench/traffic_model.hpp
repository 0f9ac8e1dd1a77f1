// The benches' names for the traffic and activation formulas, which live in the planner's library
// (optimus/plan/traffic.hpp) since optimus-plan's time model uses them too.
#pragma once

#include "optimus/plan/traffic.hpp"

namespace optimus::bench {

using plan::BlockShape;
using plan::predicted_activation_bytes_1d;
using plan::predicted_activation_bytes_2d;
using plan::predicted_bytes_1d;
using plan::predicted_bytes_2d;

}  // namespace optimus::bench

// How a train_gpt run is laid out: the grid side, the pipeline, the micro-batches and what is offloaded — the
// planner's choice (--plan auto) or the options' (--q, --pp, --schedule, --chunks, --micro-batches, --offload,
// --offload-update), each option checked against the others before any work starts.
#pragma once

#include <cstdint>
#include <optional>

#include "optimus/programs/cli.hpp"
#include "optimus/core/device.hpp"
#include "optimus/layers/offload.hpp"
#include "optimus/layers/optimizer_offload.hpp"
#include "optimus/pipeline/dynamic_order.hpp"
#include "optimus/pipeline/schedule.hpp"
#include "optimus/plan/planner.hpp"

namespace optimus::apps {

// The model's layout (optimus/plan/layout.hpp: 2D or 1D, tp, dp, pp, schedule, chunks, micro-batches, offload; each
// block's recomputation is filled once the model's depth is known) and AdamW's offloaded update (none: no optimizer
// offload).
struct RunLayout {
  plan::Layout layout;
  std::optional<OptimizerOffload> optimizer;
  pipeline::Order order = pipeline::Order::static_order;  // how a pipeline's stages run their operations (--execution)
};

// --plan auto: the plan's layout; AdamW's offloaded update (where the plan offloads it) the faster on `device`.
RunLayout layout_of(const plan::Plan& plan, Device device);
// The options' layout on `world` ranks: --schedule and --chunks need --pp > 1; --offload needs a device;
// --offload-update needs --offload (default: the faster update on `device`, docs/offload.md); --layout 1d takes --p
// (default world / pp: no replicas; world = dp x pp x p), not --q; world = dp x pp x q^2 for 2D.
RunLayout layout_of(const cli::Options& options, Device device, int world);
// --execution static|dynamic (pipeline/dynamic_order.hpp), which needs a pipeline (layout.pp > 1); default: static.
pipeline::Order execution_of(const cli::Options& options, const plan::Layout& layout);

}  // namespace optimus::apps

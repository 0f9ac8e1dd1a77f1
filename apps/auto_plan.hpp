// train_gpt --plan auto: the planner's fastest plan (optimus/plan/planner.hpp) among those train_gpt runs — 2D layouts
// of dp x pp x q^2 = the world's ranks; pipelines on CPU ranks without recomputation; recomputation per block and
// offload with pp = 1 — for the model and the global batch the options give, on this machine: the rates measured now
// by every rank at once (plan::calibrate, so that they include this job's sharing of the cores), or those of
// --calibration FILE (optimus-bench calibrate's JSON; --cores says how many ranks compute at once). The memory per
// rank is --device-memory (sim) or, on CPU ranks, the machine's physical memory divided among the ranks on it.
#pragma once

#include <cstdint>

#include "optimus/comm/communicator.hpp"
#include "optimus/programs/cli.hpp"
#include "optimus/programs/device_choice.hpp"
#include "optimus/plan/planner.hpp"

namespace optimus::apps {

// Collective over `world`; prints the plans' table on rank 0. Throws optimus::Error when nothing fits (the planner's
// message) or when an option the plan sets (--q, --pp, --schedule, --chunks, --micro-batches, --recompute, --offload)
// or one it cannot take (--init, --resume: a model whose shape comes from a file) is given too.
plan::Plan auto_plan(Communicator& world, const cli::Options& options, const DeviceChoice& device,
                     const GptConfig& config, std::int64_t global_batch, bool in_process);

}  // namespace optimus::apps

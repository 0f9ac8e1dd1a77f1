// train_gpt --plan auto (auto_plan.hpp).
#include "auto_plan.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <thread>

#include "optimus/core/error.hpp"
#include "optimus/plan/calibrate.hpp"
#include "optimus/plan/plan_report.hpp"

namespace optimus::apps {

plan::Plan auto_plan(Communicator& world, const cli::Options& o, const DeviceChoice& device, const GptConfig& config,
                     std::int64_t global_batch, bool in_process) {
  for (const char* option :
       {"q", "dp", "pp", "schedule", "chunks", "micro-batches", "recompute", "offload", "offload-update"}) {
    OPTIMUS_CHECK(!o.has(option), "--", option, " with --plan auto: the plan chooses it");
  }
  for (const char* option : {"init", "resume"}) {
    OPTIMUS_CHECK(!o.has(option), "--", option,
                  " with --plan auto: the plan is made for the options' model, not a file's");
  }
  OPTIMUS_CHECK(device.kind != Device::cuda,
                "--plan auto with --device cuda: give the GPU cluster to optimus-plan and "
                "its layout to train_gpt (this machine's calibration measures CPU ranks)");
  const int ranks = world.size();
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  const auto ram = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * page;
  // In-process ranks and mpiexec's ranks on one machine share its memory.
  const std::uint64_t memory = device.kind == Device::sim && device.sim_capacity != UINT64_MAX
                                   ? device.sim_capacity
                                   : ram / static_cast<std::uint64_t>(ranks);
  plan::Request r;
  if (o.has("calibration")) {
    const int cores = static_cast<int>(o.integer("cores", std::max(1u, std::thread::hardware_concurrency())));
    r.cluster = plan::read_calibration(o.text("calibration", ""), ranks, cores, memory);
  } else {
    OPTIMUS_CHECK(!o.has("cores"), "--cores needs --calibration (measured now, the rates include the sharing)");
    plan::Calibration c = plan::calibrate(world, 3);
    if (ranks == 1) {  // nothing to communicate: one rank plans q = 1, dp = 1, pp = 1
      c.broadcast_beta = 1e-15;
      c.broadcast_alpha = 0;
    }
    r.cluster = plan::cluster_of(c, ranks, ranks, memory,
                                 std::string("measured now by every rank") + (in_process ? " (in-process)" : ""));
  }
  r.cluster.has_device = device.kind == Device::sim;
  if (r.cluster.has_device) r.cluster.host_link = std::isfinite(device.sim_bandwidth) ? device.sim_bandwidth : 10e9;
  r.workload = plan::Workload{
      .config = config, .global_batch = global_batch, .seq = config.max_seq, .element_bytes = 4, .saved_bytes = 4};
  r.only = plan::TensorParallel::two_d;
  r.runnable_only = true;
  r.max_micro_batches = 16;
  const plan::Result result = plan::plan(r);
  if (world.rank() == 0) {
    std::printf("--plan auto: %lld layouts of %d ranks, %zu feasible that train_gpt runs\n",
                static_cast<long long>(result.enumerated), ranks, result.plans.size());
    for (const std::string& line : plan::assumptions(r)) std::printf("  %s\n", line.c_str());
    for (const std::string& line : plan::table(result, 5)) std::printf("  %s\n", line.c_str());
  }
  OPTIMUS_CHECK(!result.plans.empty(), "--plan auto: ", result.infeasible);
  return result.plans.front();
}

}  // namespace optimus::apps

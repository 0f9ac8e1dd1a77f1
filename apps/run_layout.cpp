// A train_gpt run's layout from the plan or from the options (run_layout.hpp).
#include "run_layout.hpp"

#include <algorithm>
#include <optional>

#include "optimus/core/error.hpp"
#include "optimus/grid/mesh.hpp"

namespace optimus::apps {
namespace {

constexpr std::int64_t kOffloadChunkElements = std::int64_t{1} << 20;  // AdamW's offloaded update streams 1 Mi at once

// --schedule and --chunks, which need --pp > 1 (default: 1F1B, 2 chunks where the schedule takes chunks).
void set_schedule(const cli::Options& o, plan::Layout& layout) {
  if (layout.pp == 1) {
    OPTIMUS_CHECK(!o.has("schedule") && !o.has("chunks"), "--schedule and --chunks need --pp > 1");
    return;
  }
  layout.schedule = pipeline::parse_kind(o.text("schedule", "1f1b"));
  const bool chunked = layout.schedule == pipeline::Kind::interleaved || layout.schedule == pipeline::Kind::wave;
  layout.chunks = static_cast<int>(o.integer("chunks", chunked ? 2 : 1));
}

// AdamW's offloaded update where `mode` offloads it: `update`.
std::optional<OptimizerOffload> optimizer_offload(Offload mode, OffloadUpdate update) {
  if (!offloads_optimizer(mode)) return std::nullopt;
  return OptimizerOffload{.update = update, .chunk_elements = kOffloadChunkElements};
}

// --offload and --offload-update: the way given, or the way that measured faster on this kind of device.
std::optional<OptimizerOffload> set_offload(const cli::Options& o, Device device, plan::Layout& layout) {
  layout.offload = parse_offload(o.text("offload", "none"));
  if (layout.offload == Offload::none) {
    OPTIMUS_CHECK(!o.has("offload-update"), "--offload-update needs --offload optimizer, spill or spill+activations");
    return std::nullopt;
  }
  OPTIMUS_CHECK(device != Device::cpu, "--offload ", name_of(layout.offload), " moves state between a device and the "
                "host: it needs --device sim or cuda (on the CPU everything is in host memory already)");
  const OffloadUpdate update = o.has("offload-update") ? parse_offload_update(o.text("offload-update", ""))
                                                       : preferred_offload_update(device);
  return optimizer_offload(layout.offload, update);
}

// --layout, --q, --p: the tensor parallelism and its ranks per stage; --dp (implied where not given): the replicas of
// `world`.
void set_tensor(const cli::Options& o, int world, plan::Layout& layout) {
  const int pp = layout.pp;
  const std::optional<int> dp = o.has("dp") ? std::optional(static_cast<int>(o.integer("dp", 1))) : std::nullopt;
  if (o.text("layout", "2d") == "1d") {
    OPTIMUS_CHECK(!o.has("q"), "--q is the 2D grid's side; --layout 1d takes --p (ranks per tensor-parallel group)");
    OPTIMUS_CHECK(world % pp == 0, world, " ranks do not divide into --pp ", pp, " stages");
    const int p = static_cast<int>(o.integer("p", std::max(1, world / (pp * dp.value_or(1)))));
    OPTIMUS_CHECK(world % (pp * p) == 0, "--layout 1d: ", world, " ranks are not dp x pp x p for pp = ", pp,
                  " and p = ", p, " (a multiple of ", pp * p, " ranks)");
    layout.tensor = TensorParallel::one_d;
    layout.tp = p;
  } else {
    OPTIMUS_CHECK(!o.has("p"), "--p is the 1D baseline's group size; it needs --layout 1d");
    const int q = static_cast<int>(o.integer("q", 2));
    OPTIMUS_CHECK(world % (pp * q * q) == 0, world, " ranks are not dp x pp x q^2 for pp = ", pp, " and q = ", q,
                  " (a multiple of ", pp * q * q, " ranks)");
    layout.tensor = TensorParallel::two_d;
    layout.tp = q * q;
  }
  layout.dp = Mesh::of_world(world, pp, layout.tensor, layout.two_d() ? layout.q() : layout.tp, dp).dp;
}

}  // namespace

pipeline::Order execution_of(const cli::Options& o, const plan::Layout& layout) {
  OPTIMUS_CHECK(layout.pp > 1 || !o.has("execution"), "--execution orders a pipeline's operations: it needs --pp > 1 (",
                "the layout has ", layout.pp, " stage)");
  return pipeline::parse_order(o.text("execution", "static"));
}

RunLayout layout_of(const plan::Plan& plan, Device device) {
  return {.layout = plan.layout, .optimizer = optimizer_offload(plan.layout.offload, preferred_offload_update(device))};
}

RunLayout layout_of(const cli::Options& o, Device device, int world) {
  plan::Layout layout;
  layout.pp = static_cast<int>(o.integer("pp", 1));
  layout.micro_batches = static_cast<int>(o.integer("micro-batches", 1));
  set_schedule(o, layout);
  set_tensor(o, world, layout);
  const std::optional<OptimizerOffload> optimizer = set_offload(o, device, layout);
  return {.layout = layout, .optimizer = optimizer};
}

}  // namespace optimus::apps

// A train_gpt run's layout from the plan or from the options (run_layout.hpp).
#include "run_layout.hpp"

#include "optimus/core/error.hpp"

namespace optimus::examples {
namespace {

constexpr std::int64_t kOffloadChunkElements = std::int64_t{1} << 20;  // AdamW's offloaded update streams 1 Mi at once

// --pp, --schedule, --chunks and --micro-batches as a schedule request (--pp 1: none).
std::optional<pipeline::ScheduleRequest> schedule_request(const cli::Options& o, int pp, std::int64_t micro_batches) {
  if (pp == 1) {
    OPTIMUS_CHECK(!o.has("schedule") && !o.has("chunks"), "--schedule and --chunks need --pp > 1");
    return std::nullopt;
  }
  const pipeline::Kind kind = pipeline::parse_kind(o.text("schedule", "1f1b"));
  const bool chunked = kind == pipeline::Kind::interleaved || kind == pipeline::Kind::wave;
  return pipeline::ScheduleRequest{.kind = kind, .stages = pp, .micro_batches = static_cast<int>(micro_batches),
                                   .chunks = static_cast<int>(o.integer("chunks", chunked ? 2 : 1))};
}

// --offload and --offload-update: the way given, or the way that measured faster on this kind of device.
OffloadChoice offload_choice(const cli::Options& o, Device device) {
  const Offload mode = parse_offload(o.text("offload", "none"));
  if (mode == Offload::none) {
    OPTIMUS_CHECK(!o.has("offload-update"), "--offload-update needs --offload optimizer, spill or spill+activations");
    return {.mode = mode, .optimizer = std::nullopt};
  }
  OPTIMUS_CHECK(device != Device::cpu, "--offload ", name_of(mode), " moves state between a device and the host: it "
                "needs --device sim or cuda (on the CPU everything is in host memory already)");
  const OffloadUpdate update = o.has("offload-update") ? parse_offload_update(o.text("offload-update", ""))
                                                       : preferred_offload_update(device);
  return {.mode = mode, .optimizer = OptimizerOffload{.update = update, .chunk_elements = kOffloadChunkElements}};
}

}  // namespace

RunLayout layout_of(const plan::Plan& plan, Device device) {
  const plan::Layout& l = plan.layout;
  std::optional<pipeline::ScheduleRequest> schedule;
  if (l.pp > 1) {
    schedule = pipeline::ScheduleRequest{.kind = l.schedule, .stages = l.pp, .micro_batches = l.micro_batches,
                                         .chunks = l.chunks};
  }
  return {.one_d = false,
          .q = l.q(),
          .p = 0,
          .pp = l.pp,
          .micro_batches = l.micro_batches,
          .pipeline = schedule,
          .offload = {.mode = l.offload,
                      .optimizer = offloads_optimizer(l.offload)
                                       ? std::optional(OptimizerOffload{.update = preferred_offload_update(device),
                                                                        .chunk_elements = kOffloadChunkElements})
                                       : std::nullopt}};
}

RunLayout layout_of(const cli::Options& o, Device device, int world) {
  const int pp = static_cast<int>(o.integer("pp", 1));
  const std::int64_t micro_batches = o.integer("micro-batches", 1);
  std::optional<pipeline::ScheduleRequest> schedule = schedule_request(o, pp, micro_batches);
  const bool one_d = o.text("layout", "2d") == "1d";
  int p = 0;
  if (one_d) {
    OPTIMUS_CHECK(!o.has("q"), "--q is the 2D grid's side; --layout 1d takes --p (ranks per tensor-parallel group)");
    OPTIMUS_CHECK(world % pp == 0, world, " ranks do not divide into --pp ", pp, " stages");
    p = static_cast<int>(o.integer("p", world / pp));
    OPTIMUS_CHECK(world % (pp * p) == 0, "--layout 1d: ", world, " ranks are not dp x pp x p for pp = ", pp,
                  " and p = ", p, " (a multiple of ", pp * p, " ranks)");
  } else {
    OPTIMUS_CHECK(!o.has("p"), "--p is the 1D baseline's group size; it needs --layout 1d");
  }
  return {.one_d = one_d,
          .q = one_d ? 1 : static_cast<int>(o.integer("q", 2)),
          .p = p,
          .pp = pp,
          .micro_batches = micro_batches,
          .pipeline = schedule,
          .offload = offload_choice(o, device)};
}

}  // namespace optimus::examples

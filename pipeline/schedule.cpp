// The schedules with a closed form (GPipe, 1F1B, Megatron's interleaved 1F1B), the placement of chunks, and the
// names. The wave and ZB-H1 are made by list scheduling (list_schedule.cpp).
#include "optimus/pipeline/schedule.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "list_schedule.hpp"
#include "optimus/core/error.hpp"

namespace optimus::pipeline {
namespace {

constexpr std::array<std::pair<Kind, std::string_view>, 5> kNames = {{{Kind::gpipe, "gpipe"},
                                                                     {Kind::one_f_one_b, "1f1b"},
                                                                     {Kind::interleaved, "interleaved"},
                                                                     {Kind::wave, "wave"},
                                                                     {Kind::zero_bubble, "zb"}}};

Op forward(int k, int c) { return Op{.work = Work::forward, .micro_batch = k, .chunk = c}; }
Op backward(int k, int c) { return Op{.work = Work::backward, .micro_batch = k, .chunk = c}; }

// GPipe: every forward, then every backward (in micro-batch order, the order gradients accumulate in).
std::vector<Op> gpipe_stage(int m) {
  std::vector<Op> ops;
  for (int k = 0; k < m; ++k) ops.push_back(forward(k, 0));
  for (int k = 0; k < m; ++k) ops.push_back(backward(k, 0));
  return ops;
}

// 1F1B (PipeDream-flush): S-s-1 forwards to fill the pipeline, then one forward and one backward in turn, then the
// remaining backwards.
std::vector<Op> one_f_one_b_stage(int stages, int stage, int m) {
  const int warmup = std::min(stages - stage - 1, m);
  std::vector<Op> ops;
  for (int k = 0; k < warmup; ++k) ops.push_back(forward(k, 0));
  for (int i = 0; i < m - warmup; ++i) {
    ops.push_back(forward(warmup + i, 0));
    ops.push_back(backward(i, 0));
  }
  for (int k = m - warmup; k < m; ++k) ops.push_back(backward(k, 0));
  return ops;
}

// Megatron's interleaved 1F1B: the stage's i-th forward is micro-batch (i / (S v)) S + i % S on chunk (i / S) % v —
// S micro-batches through chunk 0, the same S through chunk 1, ... — and its i-th backward the same micro-batch on
// chunk v-1 - (i / S) % v. (S - s - 1) * 2 + (v - 1) * S forwards fill the pipeline, then one forward and one
// backward in turn.
std::vector<Op> interleaved_stage(int stages, int stage, int m, int v) {
  const int total = m * v;
  const auto micro = [&](int i) { return (i / (stages * v)) * stages + i % stages; };
  const auto f = [&](int i) { return forward(micro(i), (i / stages) % v); };
  const auto b = [&](int i) { return backward(micro(i), v - 1 - (i / stages) % v); };
  const int warmup = std::min((stages - stage - 1) * 2 + (v - 1) * stages, total);
  std::vector<Op> ops;
  for (int i = 0; i < warmup; ++i) ops.push_back(f(i));
  for (int i = 0; i < total - warmup; ++i) {
    ops.push_back(f(warmup + i));
    ops.push_back(b(i));
  }
  for (int i = total - warmup; i < total; ++i) ops.push_back(b(i));
  return ops;
}

void check_request(const ScheduleRequest& r) {
  const std::string_view name = name_of(r.kind);
  OPTIMUS_CHECK(r.stages >= 1, "pipeline schedule ", name, ": ", r.stages, " stages (at least 1)");
  OPTIMUS_CHECK(r.micro_batches >= 1, "pipeline schedule ", name, ": ", r.micro_batches,
                " micro-batches (at least 1)");
  const bool many_chunks = r.kind == Kind::interleaved || r.kind == Kind::wave;
  OPTIMUS_CHECK(many_chunks || r.chunks == 1, "pipeline schedule ", name, " has one chunk per stage, not ", r.chunks,
                " (--chunks is for interleaved and wave)");
  OPTIMUS_CHECK(!many_chunks || r.chunks >= 2, "pipeline schedule ", name, " needs at least 2 chunks per stage, got ",
                r.chunks);
  OPTIMUS_CHECK(r.kind != Kind::interleaved || r.micro_batches % r.stages == 0, "pipeline schedule interleaved: ",
                r.micro_batches, " micro-batches is not a multiple of the ", r.stages,
                " stages (micro-batches go through each chunk in groups of S)");
}

}  // namespace

Kind parse_kind(std::string_view name) {
  for (const auto& [kind, text] : kNames) {
    if (text == name) return kind;
  }
  OPTIMUS_FAIL("unknown pipeline schedule '", name, "' (gpipe, 1f1b, interleaved, wave or zb)");
}

std::string_view name_of(Kind kind) {
  for (const auto& [k, text] : kNames) {
    if (k == kind) return text;
  }
  OPTIMUS_FAIL("name_of: not a pipeline schedule kind: ", static_cast<int>(kind));
}

int Schedule::virtual_stage(int stage, int chunk) const {
  OPTIMUS_CHECK(stage >= 0 && stage < stages && chunk >= 0 && chunk < chunks, "pipeline: stage ", stage, " chunk ",
                chunk, " is not in ", stages, " stages x ", chunks, " chunks");
  const bool returning = kind == Kind::wave && chunk % 2 == 1;  // the wave's way back up
  return chunk * stages + (returning ? stages - 1 - stage : stage);
}

int Schedule::stage_of(int u) const {
  OPTIMUS_CHECK(u >= 0 && u < virtual_stages(), "pipeline: virtual stage ", u, " is not in [0, ", virtual_stages(), ")");
  const int c = u / stages, offset = u % stages;
  return kind == Kind::wave && c % 2 == 1 ? stages - 1 - offset : offset;
}

int Schedule::chunk_of(int u) const {
  OPTIMUS_CHECK(u >= 0 && u < virtual_stages(), "pipeline: virtual stage ", u, " is not in [0, ", virtual_stages(), ")");
  return u / stages;
}

Schedule make_schedule(const ScheduleRequest& r) {
  check_request(r);
  Schedule s{.kind = r.kind,
             .stages = r.stages,
             .chunks = r.chunks,
             .micro_batches = r.micro_batches,
             .split_backward = r.kind == Kind::zero_bubble,
             .ops = {}};
  switch (r.kind) {
    case Kind::gpipe:
      for (int stage = 0; stage < r.stages; ++stage) s.ops.push_back(gpipe_stage(r.micro_batches));
      break;
    case Kind::one_f_one_b:
      for (int stage = 0; stage < r.stages; ++stage) {
        s.ops.push_back(one_f_one_b_stage(r.stages, stage, r.micro_batches));
      }
      break;
    case Kind::interleaved:
      for (int stage = 0; stage < r.stages; ++stage) {
        s.ops.push_back(interleaved_stage(r.stages, stage, r.micro_batches, r.chunks));
      }
      break;
    case Kind::wave:
    case Kind::zero_bubble: detail::list_schedule(s); break;
  }
  validate(s);
  return s;
}

Schedule one_stage(int micro_batches) {
  return make_schedule({.kind = Kind::one_f_one_b, .stages = 1, .micro_batches = micro_batches, .chunks = 1});
}

std::string describe(const Schedule& schedule, const Op& op) {
  static constexpr std::array<const char*, 4> kLetters = {"F", "B", "b", "w"};
  std::string text = kLetters[static_cast<std::size_t>(op.work)];
  text += std::to_string(op.micro_batch);
  if (schedule.chunks > 1) {
    text += '.';
    text += std::to_string(op.chunk);
  }
  return text;
}

}  // namespace optimus::pipeline

// Memory per rank of a layout (layout.hpp), by kind and place, from the formulas the trackers are asserted against:
//   parameters, gradients, optimizer   layers/offload.hpp's state_footprint (for each offload mode) of the stage's
//                                      local shards: a block's P_b elements, the embedding's, ln_f's and wte's;
//   activations                        pp = 1: the micro-batch's saved contexts (layers/recompute.hpp's
//                                      block_saved_bytes per block and policy, head_saved_bytes), with full
//                                      recomputation's transient context and spill.hpp's activation offload;
//                                      pp > 1: pipeline/memory.hpp's peak over the stage's schedule;
//   workspace                          an estimate (not a formula the trackers assert): the largest transient of a
//                                      step — a SUMMA product's panels and partial result, or the head's logits.
// The local shards, per rank (V: the stored vocabulary, 2D GptConfig::stored_vocab(q), 1D stored_vocab(t)):
//   2D q x q:  P_b = (4h^2 + 2h ffn + 9h + ffn) / q^2     [every matrix and vector split in q^2 pieces]
//              embedding V h / q^2 + max_seq h / q^2, ln_f 2h / q^2
//   1D t:      P_b = (4h^2 + 2h ffn)/t + (3h + ffn)/t + 2h + 4h
//              [column-parallel c_attn, c_fc and their biases split; row-parallel weights split, their biases and
//               both LayerNorms whole on every rank]
//              embedding V h / t + max_seq h (wpe whole), ln_f 2h
// A stage holds its virtual stages' blocks (pipeline/partition.hpp), the embedding on the stage of u = 0, and wte,
// ln_f and the head on the stage of u = U-1; the gradient of the head's wte part (W = wte's local elements) is held
// apart on the head's stage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optimus/core/memory.hpp"
#include "optimus/pipeline/schedule.hpp"
#include "optimus/plan/layout.hpp"

namespace optimus::plan {

// Bytes by kind (MemoryKind order) in one place.
struct KindBytes {
  std::uint64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0, workspace = 0;
  std::uint64_t of(MemoryKind kind) const;
  std::uint64_t total() const { return parameters + gradients + optimizer + activations + workspace; }
  friend bool operator==(const KindBytes&, const KindBytes&) = default;
};

struct MemoryPrediction {
  KindBytes device, host;  // the rank with the most device memory (its stage is `stage`)
  int stage = 0;
};

// One block's local parameter elements, and the other ones of the stage that holds the embedding (and ln_f, for
// pp = 1), per rank.
std::int64_t block_parameters(const Layout& layout, const GptConfig& config);

// The layout's memory per rank on every stage ([pp]); `with_device`: offload modes place bytes on the host.
std::vector<MemoryPrediction> predict_memory_by_stage(const Layout& layout, const Workload& workload);
// The stage with the most device memory.
MemoryPrediction predict_memory(const Layout& layout, const Workload& workload);

// The largest global batch (sequences per step, at most 2^24) of `workload` on `layout` whose predicted device memory
// per rank, plus `extra_per_sequence` bytes for each sequence a rank holds of its micro-batch (all of them on a 1D
// group, 1/q on a 2D grid, whose rows split the batch: what a caller's layers hold beyond the formulas, or, negative,
// short of them; 0 for neither), is at most `bytes`; 0 where not even the smallest batch fits. Batches step by what
// the layout splits them into (dp x m, times q for a 2D grid's rows). Throws optimus::Error naming the shapes where
// the layout does not fit the workload at any batch (shape_error).
std::int64_t largest_batch(const Layout& layout, Workload workload, std::uint64_t bytes,
                           std::int64_t extra_per_sequence);

// One block's saved bytes per rank for one micro-batch under `policy`, and full recomputation's transient bytes.
std::int64_t block_activation_bytes(const Layout& layout, const Workload& workload, Recompute policy);

// The peak bytes of saved activations per rank of each stage (stage 0, 1, ...) under `schedule` (layout's pipeline),
// micro-batches of `sequences` sequences of `seq` tokens in elements of `element_bytes`, without recomputation, as
// optimus/pipeline/memory.hpp models a stage's chunks: exact for the 2D layouts; empty for the 1D baseline's, which it
// does not model.
std::vector<std::int64_t> stage_activation_peaks(const Layout& layout, const pipeline::Schedule& schedule,
                                                 const GptConfig& config, std::int64_t sequences, std::int64_t seq,
                                                 std::int64_t element_bytes);

}  // namespace optimus::plan

// Activation bytes per stage (memory.hpp): the formulas, and the running sum along each stage's list.
#include "optimus/pipeline/memory.hpp"

#include <algorithm>
#include <numeric>

#include "optimus/core/error.hpp"
#include "optimus/layers/recompute.hpp"
#include "optimus/pipeline/partition.hpp"

namespace optimus::pipeline {

std::int64_t peak_activation_bytes(const Schedule& s, int stage, const std::vector<std::size_t>& order,
                                   const std::vector<ChunkBytes>& by_virtual_stage) {
  OPTIMUS_CHECK(stage >= 0 && stage < s.stages && static_cast<int>(s.ops.size()) == s.stages, "pipeline memory of ",
                name_of(s.kind), ": stage ", stage, " of ", s.stages);
  OPTIMUS_CHECK(static_cast<int>(by_virtual_stage.size()) == s.virtual_stages(), "pipeline memory of ",
                name_of(s.kind), ": bytes for ", by_virtual_stage.size(), " virtual stages, not ", s.virtual_stages());
  const std::vector<Op>& ops = s.ops[static_cast<std::size_t>(stage)];
  std::int64_t held = 0, peak = 0;
  for (const std::size_t i : order) {
    OPTIMUS_CHECK(i < ops.size(), "pipeline memory of ", name_of(s.kind), ": stage ", stage, " has no operation ", i,
                  " (", ops.size(), " in its list)");
    const Op& op = ops[i];
    const ChunkBytes& b = by_virtual_stage[static_cast<std::size_t>(s.virtual_stage(stage, op.chunk))];
    switch (op.work) {
      case Work::forward: held += b.saved; break;
      case Work::backward: held -= b.saved; break;
      case Work::backward_input: held -= b.saved - b.weight; break;
      case Work::backward_weight: held -= b.weight; break;
    }
    peak = std::max(peak, held);
  }
  return peak;
}

std::vector<std::int64_t> peak_activation_bytes(const Schedule& s, const std::vector<ChunkBytes>& by_virtual_stage) {
  validate(s);
  std::vector<std::int64_t> peaks;
  for (int stage = 0; stage < s.stages; ++stage) {
    std::vector<std::size_t> in_order(s.ops[static_cast<std::size_t>(stage)].size());
    std::iota(in_order.begin(), in_order.end(), std::size_t{0});
    peaks.push_back(peak_activation_bytes(s, stage, in_order, by_virtual_stage));
  }
  return peaks;
}

std::vector<ChunkBytes> gpt_chunk_bytes(const Schedule& s, const GptConfig& config, const MicroBatchShape& shape) {
  const int q = shape.q;
  const std::int64_t e = shape.saved_bytes, t = shape.element_bytes, rows = shape.sequences * shape.seq / q;
  OPTIMUS_CHECK(q >= 1 && shape.sequences >= 1 && shape.seq >= 1 && (shape.sequences * shape.seq) % q == 0 && e > 0 &&
                    t > 0,
                "pipeline memory: a micro-batch of ", shape.sequences, " sequences of ", shape.seq,
                " tokens with elements of ", t, " bytes saved in ", e, " does not split over q = ", q);
  const std::int64_t block = e * rows * (config.hidden / q);  // one [N, h] tensor's block, saved
  const BlockActivations one = BlockActivations::of(config, shape.sequences, shape.seq, q, t, e);
  const std::int64_t block_weight = 5 * block + e * rows * (config.ffn / q);
  // ln_f's xhat and 1/std, the head's x and dlogits; BERT's head transform's input and GELU's input (the input held
  // for its weight gradient until B_weight).
  const std::int64_t transform = config.block.head_transform ? block : 0;
  const std::int64_t head_saved = head_saved_bytes(one, config.stored_vocab(q)) + 2 * transform;
  const std::int64_t head_weight = head_saved - t * rows - transform;  // not ln_f's 1/std, nor GELU's input
  std::vector<ChunkBytes> out;
  for (int u = 0; u < s.virtual_stages(); ++u) {
    const std::int64_t blocks = layers_of(s, config.layers, u).count;
    ChunkBytes b{.saved = blocks * block_saved_bytes(one, Recompute::none), .weight = blocks * block_weight};
    if (u == s.virtual_stages() - 1) {
      b.saved += head_saved;
      b.weight += head_weight;
    }
    out.push_back(b);
  }
  return out;
}

}  // namespace optimus::pipeline

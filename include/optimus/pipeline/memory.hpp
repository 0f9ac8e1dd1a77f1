// The activation bytes a pipeline stage holds per rank, predicted exactly (optimus-bench pipeline and the pipeline
// tests compare it with the memory tracker).
//
// A chunk's forward of one micro-batch saves `saved` bytes (its contexts); a whole backward frees them all; a split
// one frees all but `weight` in B_input (what the queued weight gradients read: layers/weight_gradients.hpp) and
// the rest in B_weight. Each stage runs its list in order and an operation only allocates (F) or only frees
// (backwards), so the stage's peak is the largest running sum along its list — independent of timing. For 1F1B with
// equal chunks that is min(S-s, m) * saved (simulator.hpp's peak_live).
//
// A chunk of the pipeline GPT (gpt.hpp), N = b*s tokens of one micro-batch, a q x q grid, elements of t bytes saved
// in e bytes (2 under bf16 GEMMs with T = float, else t), per rank:
//   saved  = blocks * block_saved_bytes(none)                       (recompute.hpp)
//          + on u = U-1: ln_f's xhat e*N*h/q^2 and 1/std t*N/q, the head's x e*N*h/q^2 and dlogits e*N*V/q^2
//            (V: the stored vocabulary)
//   weight = blocks * e*N*(5h + ffn)/q^2   (the inputs of c_attn, attn.c_proj, c_fc (h each) and mlp.c_proj (ffn),
//                                           ln_1's and ln_2's xhat (h each))
//          + on u = U-1: ln_f's xhat, the head's x and dlogits
// The embedding saves only token ids (not device memory). Blocks handed between stages, received blocks and the
// copies of output gradients that queued weight gradients hold are workspace, not activations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/pipeline/schedule.hpp"

namespace optimus::pipeline {

struct ChunkBytes {
  std::int64_t saved = 0;   // held from F(k, c) until its backward
  std::int64_t weight = 0;  // of those, held from B_input(k, c) until B_weight(k, c) (split schedules)
};

// [S]: each stage's peak of activation bytes over its list, given each virtual stage's bytes ([U]).
std::vector<std::int64_t> peak_activation_bytes(const Schedule& schedule, const std::vector<ChunkBytes>& by_virtual_stage);
// Stage `stage`'s peak when it runs its list's entries in `order` (indices into schedule.ops[stage]; a dynamic order's,
// dynamic_order.hpp), `by_virtual_stage` as above. Throws optimus::Error, naming the value, for a stage, a count of
// virtual stages or an index off the schedule.
std::int64_t peak_activation_bytes(const Schedule& schedule, int stage, const std::vector<std::size_t>& order,
                                   const std::vector<ChunkBytes>& by_virtual_stage);

// The micro-batch's shape on one rank.
struct MicroBatchShape {
  std::int64_t sequences = 0;  // b: sequences per micro-batch (the replica's)
  std::int64_t seq = 0;        // s
  int q = 1;
  std::int64_t element_bytes = 0;  // t
  std::int64_t saved_bytes = 0;    // e
};

// [U]: the pipeline GPT's bytes per virtual stage (the formulas above).
std::vector<ChunkBytes> gpt_chunk_bytes(const Schedule& schedule, const GptConfig& config, const MicroBatchShape& shape);

}  // namespace optimus::pipeline

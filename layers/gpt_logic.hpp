// Internal to the layers: what Gpt2D and the 1D baseline's Gpt1D do alike — a batch taken as micro-batches, the
// forward through embedding, blocks and ln_f, and recomputation set per block.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "finite_check.hpp"
#include "optimus/core/error.hpp"
#include "optimus/layers/context.hpp"

namespace optimus::detail {

// tokens, targets: `batch` whole sequences, row-major [b, s]. Calls step(k, tokens_k, targets_k, micro) for the
// micro-batches k = 0 .. m-1 in order, each `micro` = batch / m sequences. Throws (naming `who`) unless m divides the
// batch and the ids are whole sequences.
template <class Step>
void for_each_micro_batch(const char* who, const std::vector<int>& tokens, const std::vector<int>& targets,
                          std::int64_t batch, std::int64_t micro_batches, Step&& step) {
  OPTIMUS_CHECK(micro_batches >= 1 && batch >= 1 && batch % micro_batches == 0, who, ": ", micro_batches,
                " micro-batches do not divide the batch of ", batch, " sequences");
  const auto n = static_cast<std::int64_t>(tokens.size());
  OPTIMUS_CHECK(n % batch == 0 && static_cast<std::int64_t>(targets.size()) == n, who, ": ", n, " tokens and ",
                targets.size(), " targets are not ", batch, " whole sequences");
  const std::int64_t per_micro = n / micro_batches;
  for (std::int64_t k = 0; k < micro_batches; ++k) {
    const auto first = static_cast<std::ptrdiff_t>(k * per_micro), last = first + per_micro;
    step(k, std::vector<int>(tokens.begin() + first, tokens.begin() + last),
         std::vector<int>(targets.begin() + first, targets.begin() + last), batch / micro_batches);
  }
}

// What forward_to_head tells about the blocks it runs: begin(contexts) once the blocks' contexts exist, enter(l)
// before block l, leave(l) after it (a spilled model's residency, layers/spill.hpp). This one does nothing.
struct NoBlockVisit {
  template <class Contexts>
  void begin(Contexts&) {}
  void enter(std::size_t) {}
  void leave(std::size_t) {}
};

// A training or inference forward up to ln_f's output [b*s, h]: the embedding, every block, ln_f, each filling its
// part of `saved` (emptied first). tokens: b*s ids, row-major [b, s].
template <class T, class Embedding, class Block, class LayerNorm, class Visit = NoBlockVisit>
auto forward_to_head(Embedding& embedding, std::vector<std::unique_ptr<Block>>& blocks, LayerNorm& ln_f,
                     const std::vector<int>& tokens, std::int64_t batch, const Pass& pass, GptContext<T>& saved,
                     Visit&& visit = NoBlockVisit{}) {
  saved = GptContext<T>{};
  saved.blocks.resize(blocks.size());
  visit.begin(saved.blocks);
  auto x = embedding.forward(tokens, batch, pass, saved.embedding);
  check_finite(x, "embedding forward output");
  const std::int64_t seq = static_cast<std::int64_t>(tokens.size()) / batch;
  for (std::size_t l = 0; l < blocks.size(); ++l) {
    visit.enter(l);
    x = blocks[l]->forward(x, seq, pass, saved.blocks[l]);
    visit.leave(l);
  }
  auto y = ln_f.forward(x, pass, saved.ln_f);
  check_finite(y, "ln_f forward output");
  return y;
}

// Block `layer`'s recomputation policy (throws naming the layer unless it is one of `blocks`).
template <class Block>
void set_block_recompute(std::vector<std::unique_ptr<Block>>& blocks, std::int64_t layer, Recompute policy) {
  OPTIMUS_CHECK(layer >= 0 && layer < static_cast<std::int64_t>(blocks.size()), "set_recompute: layer ", layer,
                " is not one of the model's ", blocks.size(), " blocks");
  blocks[static_cast<std::size_t>(layer)]->set_recompute(policy);
}

}  // namespace optimus::detail

// optimus::megatron::Embedding1D: Megatron's vocab-parallel token embedding plus a replicated position embedding.
//   wte: [V, h] split by rows over the p ranks of the group (rank r: ids [r V/p, (r+1) V/p)), V the stored, padded
//        vocabulary (GptConfig::stored_vocab(p)); wpe: [max_seq, h] replicated, for learned positions (none with rotary
//        positions). Output x: [N, h] replicated, N = b*s. lm_head.weight: the untied LM head's own [V, h], split as
//        wte, held here on the head's stage.
// Forward: each rank looks up all N tokens in its slice (zero rows for ids outside it), one all-reduce of [N, h]
// sums the slices; then positions and the embedding dropout (the same global masks as the 2D model and the
// reference). Backward: dx (replicated) goes into the rows of dwte this rank holds; dwpe, like wpe, is the same on
// every rank, so neither needs communication. Communication: one all-reduce of N*h elements, forward only.
#pragma once

#include <optional>
#include <vector>

#include "optimus/core/gpt_config.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/embedding.hpp"
#include "optimus/layers/megatron/group.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/layers/pass.hpp"

namespace optimus::megatron {

template <class T>
class Embedding1D {
 public:
  // Checks that p divides the stored vocabulary. `head`: whether the LM head runs beside it (an untied head's weight
  // is then held here).
  Embedding1D(const Group& group, const GptConfig& config, TiedHead head);

  using Context = EmbeddingContext;

  // tokens: b*s ids, row-major [b, s], checked against the vocabulary and max_seq; returns x [b*s, h] (replicated).
  DistMatrix<T> forward(const std::vector<int>& tokens, std::int64_t batch, const Pass& pass, Context& saved);
  // Accumulates this rank's rows of dwte, and dwpe (learned positions).
  void backward(Context saved, const DistMatrix<T>& dx);

  void parameters(std::vector<ParameterRef<T>>& out);
  void zero_grad();

  // This rank's rows of the token embedding [V/p, h] (from id first_id()).
  const DistMatrix<T>& wte() const { return wte_; }
  DistMatrix<T>& wte_grad() { return dwte_; }
  std::int64_t first_id() const { return group_.rank() * wte_.rows(); }
  // This rank's rows of the LM head's weight (wte where tied, lm_head where not), and the untied one's gradient.
  const DistMatrix<T>& head_weight() const { return lm_head_ ? *lm_head_ : wte_; }
  DistMatrix<T>& lm_head_grad();

 private:
  Group group_;
  GptConfig config_;
  std::int64_t stored_vocab_;
  DistMatrix<T> wte_, dwte_;                        // on the group's one-rank grid
  std::optional<DistMatrix<T>> wpe_, dwpe_;         // learned positions only
  std::optional<DistMatrix<T>> lm_head_, dlm_head_;  // the untied head's, here
};

extern template class Embedding1D<float>;
extern template class Embedding1D<double>;

}  // namespace optimus::megatron

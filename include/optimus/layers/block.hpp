// optimus::TransformerBlock<T, Split>: the pre-norm transformer block (GPT-2's or Llama's parts), one class for both
// splits (optimus/layers/split.hpp): TransformerBlock2D on the q x q grid, megatron::TransformerBlock1D over a Group
// (optimus/layers/megatron/block.hpp).
//   x1 = x + dropout(attn(ln_1(x))),  y = x1 + dropout(mlp(ln_2(x1)));  x, x1, y: [N, h].
// Parameters are named h.<layer>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}.{weight, bias}.
// A training forward fills a BlockContext under the block's recomputation policy (recompute.hpp: none by default);
// the bytes it holds per rank are block_saved_bytes.
#pragma once

#include "optimus/config/gpt_config.hpp"
#include "optimus/layers/attention.hpp"
#include "optimus/layers/layernorm.hpp"
#include "optimus/layers/mlp.hpp"
#include "optimus/layers/sublayers.hpp"

namespace optimus {

template <class T, class Split>
class TransformerBlock : public Sublayers<T, TransformerBlock<T, Split>> {
 public:
  using Place = typename Split::Place;

  TransformerBlock(const Place& place, const GptConfig& config, std::int64_t layer);
  // The same with its parameters and gradients where `tags` say (ParameterTags: a spilled block's are in host memory).
  TransformerBlock(const Place& place, const ParameterTags& tags, const GptConfig& config, std::int64_t layer);

  using Context = BlockContext<T>;

  // x, y: [N, h] with N = b*s; a training pass fills `saved`.
  DistMatrix<T> forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same, split: the input gradient now, the weight gradients queued in `later` (weight_gradients.hpp).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);

  // What training forwards from now on save (a context keeps the policy it was made with).
  void set_recompute(Recompute policy) { recompute_ = policy; }
  Recompute recompute() const { return recompute_; }

  // Its sublayers' parameters, their norms' named as the split keeps them (Split::relabel_norms); parameter_storage
  // and zero_grad: its sublayers' (Sublayers).
  void parameters(std::vector<ParameterRef<T>>& out);

 private:
  friend Sublayers<T, TransformerBlock>;
  auto sublayers() { return std::tie(ln_1_, attn_, ln_2_, mlp_); }
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later);
  Place place_;
  GptConfig config_;
  std::int64_t layer_;
  LayerNorm2D<T> ln_1_;  // on Split::activation_grid
  Attention<T, Split> attn_;
  LayerNorm2D<T> ln_2_;
  MLP<T, Split> mlp_;
  Recompute recompute_ = Recompute::none;
};

template <class T>
using TransformerBlock2D = TransformerBlock<T, Split2D>;

extern template class TransformerBlock<float, Split2D>;
extern template class TransformerBlock<double, Split2D>;

}  // namespace optimus

// optimus::MLP<T, Split>: y = c_proj(act(c_fc(x))); x, y: [N, h], c_proj: ffn -> h, act:
//   GELU  : c_fc h -> ffn (GPT-2's);
//   SwiGLU: c_fc h -> 2 ffn holding [gate | up] (Llama's gate_proj and up_proj as one SUMMA product), stored so that
//           rank (i, j)'s column block is [gate_j | up_j], matching columns; act = silu(gate) * up, [N, ffn].
// Saved for backward (MlpContext): the c_fc output (for the activation's derivative), plus what each linear saves.
// One class for both splits (optimus/layers/split.hpp): MLP2D, two Linear2D on the q x q grid; megatron::MLP1D, c_fc
// column-parallel and c_proj row-parallel over a Group (optimus/layers/megatron/block.hpp).
#pragma once

#include "optimus/config/gpt_config.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/split.hpp"
#include "optimus/layers/sublayers.hpp"

namespace optimus {

template <class T, class Split>
class MLP : public Sublayers<T, MLP<T, Split>> {
 public:
  using Place = typename Split::Place;

  MLP(const Place& place, const std::string& name, std::int64_t hidden, std::int64_t ffn);
  // The same with its linears' parameters and gradients where `tags` say (ParameterTags).
  MLP(const Place& place, const ParameterTags& tags, const std::string& name, std::int64_t hidden, std::int64_t ffn);
  // The same with the activation `kind`, and its linears' biases or without.
  MLP(const Place& place, const ParameterTags& tags, const std::string& name, std::int64_t hidden, std::int64_t ffn,
      MlpKind kind, bool bias);

  using Context = MlpContext<T>;

  // x, y: [N, h]; a training pass fills `saved`.
  DistMatrix<T> forward(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  // The same from an input kept as c_fc keeps it (LayerNorm2D::forward_saved), which c_fc takes over.
  DistMatrix<T> forward(SavedActivation<T> x, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same, split: the input gradient now, the weight gradients queued in `later` (weight_gradients.hpp).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);

  // parameters, parameter_storage, zero_grad: its linears' (Sublayers).

 private:
  friend Sublayers<T, MLP>;
  auto sublayers() { return std::tie(c_fc_, c_proj_); }
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later);
  MlpKind kind_;
  typename Split::template ColumnLinear<T> c_fc_;
  typename Split::template RowLinear<T> c_proj_;
};

template <class T>
using MLP2D = MLP<T, Split2D>;

extern template class MLP<float, Split2D>;
extern template class MLP<double, Split2D>;

}  // namespace optimus

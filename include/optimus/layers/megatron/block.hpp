// The 1D (Megatron-LM) transformer block: the pre-norm block (GPT-2's or Llama's parts) with attention heads and the
// MLP's inner dimension split over the p ranks of a Group, activations [N, h] replicated.
//   Attention1D: c_attn column-parallel (rank r holds the Q, K, V of heads [r*a/p, (r+1)*a/p)), local
//                causal attention, c_proj row-parallel.
//   MLP1D      : c_fc column-parallel, GELU or SwiGLU, c_proj row-parallel.
// Communication per block: two all-reduces of [N, h] forward (after each row-parallel layer) and two
// backward (after each column-parallel layer). LayerNorm parameters and row-parallel biases are replicated.
// Parameter names are GPT-2's, as for the 2D block, so the same reference checks both.
#pragma once

#include "optimus/core/gpt_config.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/attention.hpp"
#include "optimus/layers/dropout.hpp"
#include "optimus/layers/layernorm.hpp"
#include "optimus/layers/megatron/linear.hpp"

namespace optimus::megatron {

template <class T>
class Attention1D {
 public:
  // The attention `spec` describes (grouped-query: rank r holds query heads [r a/p, ...) and key/value heads
  // [r kv/p, ...); rotary positions; biases or none); its linears' parameters and gradients live where `tags` say.
  Attention1D(const Group& group, const ParameterTags& tags, const std::string& name, const AttentionSpec& spec);
  using Context = AttentionContext<T>;  // qkv [N, (h + 2 kv d)/p] and the core's log-sum-exps

  DistMatrix<T> forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass, Context& saved);
  // The same from an input kept as c_attn keeps it (LayerNorm2D::forward_saved), which c_attn takes over.
  DistMatrix<T> forward(SavedActivation<T> x, std::int64_t seq, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same, split: the input gradient now, the weight gradients queued in `later` (weight_gradients.hpp).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);
  void parameters(std::vector<ParameterRef<T>>& out);
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out);
  void zero_grad();

 private:
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later);
  Group group_;
  AttentionSpec spec_;
  ColumnParallelLinear<T> c_attn_;
  RowParallelLinear<T> c_proj_;
};

template <class T>
class MLP1D {
 public:
  using Context = MlpContext<T>;  // pre [N, ffn/p]

  // Its linears' parameters and gradients live where `tags` say (ParameterTags).
  // act GELU or SwiGLU (`kind`; c_fc then h -> 2 ffn, rank r holding [gate_r | up_r]).
  MLP1D(const Group& group, const ParameterTags& tags, const std::string& name, std::int64_t hidden, std::int64_t ffn,
        MlpKind kind, bool bias);
  DistMatrix<T> forward(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  // The same from an input kept as c_fc keeps it (LayerNorm2D::forward_saved), which c_fc takes over.
  DistMatrix<T> forward(SavedActivation<T> x, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same, split: the input gradient now, the weight gradients queued in `later` (weight_gradients.hpp).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);
  void parameters(std::vector<ParameterRef<T>>& out);
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out);
  void zero_grad();

 private:
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later);
  MlpKind kind_;
  ColumnParallelLinear<T> c_fc_;
  RowParallelLinear<T> c_proj_;
};

template <class T>
class TransformerBlock1D {
 public:
  using Context = BlockContext<T>;

  TransformerBlock1D(const Group& group, const GptConfig& config, std::int64_t layer);
  // The same with its parameters and gradients where `tags` say (ParameterTags: a spilled block's are in host memory).
  TransformerBlock1D(const Group& group, const ParameterTags& tags, const GptConfig& config, std::int64_t layer);
  DistMatrix<T> forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same, split: the input gradient now, the weight gradients queued in `later` (weight_gradients.hpp).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);
  void set_recompute(Recompute policy) { recompute_ = policy; }
  void parameters(std::vector<ParameterRef<T>>& out);
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out);
  void zero_grad();

 private:
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later);
  GptConfig config_;
  std::int64_t layer_;
  LayerNorm2D<T> ln_1_;  // on the group's one-rank grid: a plain, replicated LayerNorm
  Attention1D<T> attn_;
  LayerNorm2D<T> ln_2_;
  MLP1D<T> mlp_;
  Recompute recompute_ = Recompute::none;
};

extern template class Attention1D<float>;
extern template class Attention1D<double>;
extern template class MLP1D<float>;
extern template class MLP1D<double>;
extern template class TransformerBlock1D<float>;
extern template class TransformerBlock1D<double>;

}  // namespace optimus::megatron

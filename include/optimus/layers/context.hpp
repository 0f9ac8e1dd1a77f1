// Saved state as a value: what a training forward keeps for its backward (tiny-cuda-nn's pattern). Every layer's
// forward fills one of these contexts and its backward consumes it (takes it by value and frees it on return), so any
// number of forwards may be in flight and backward may take them in any order; dropping a context frees its memory.
// An inference pass (Pass::training false) leaves the context empty. Contexts are move-only; a moved-from context is
// empty, and backward refuses an empty one.
//
// Each context records what its saved tensors depend on (the device and the GEMM math of the grid handle that saved
// it, grid/execution.hpp); backward on a handle that differs refuses it instead of reading it wrongly.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "optimus/core/dtype.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/recompute.hpp"

namespace optimus {

// Whether a context holds a training forward's state, and the settings it was saved under. Moving clears the source.
class ContextMark {
 public:
  ContextMark() = default;
  explicit ContextMark(const Grid& grid) : filled_(true), math_(grid.gemm_math()), device_(grid.device()) {}
  ContextMark(ContextMark&& other) noexcept
      : filled_(std::exchange(other.filled_, false)), math_(other.math_), device_(other.device_) {}
  ContextMark& operator=(ContextMark&& other) noexcept {
    filled_ = std::exchange(other.filled_, false);
    math_ = other.math_;
    device_ = other.device_;
    return *this;
  }
  ContextMark(const ContextMark&) = delete;
  ContextMark& operator=(const ContextMark&) = delete;

  bool filled() const { return filled_; }
  // Throws optimus::Error, naming `layer`, unless filled by a training forward on a grid with `grid`'s device and
  // GEMM math.
  void check(const Grid& grid, std::string_view layer) const;

 private:
  bool filled_ = false;
  ops::GemmMath math_ = ops::GemmMath::f32;
  DeviceMemory* device_ = nullptr;
};

// A linear layer (2D or 1D): its input x [N, in] (as the layer splits it), bf16 under mixed precision.
template <class T>
struct LinearContext {
  ContextMark mark;
  std::optional<SavedActivation<T>> x;
};

// LayerNorm: xhat [N, h] (bf16 under mixed precision) and 1/std [N/q] (this rank's rows).
template <class T>
struct LayerNormContext {
  ContextMark mark;
  std::optional<SavedActivation<T>> xhat;
  Tensor<T> rstd;
};

// The MLP: its two linears' contexts and GELU's input pre = c_fc's output [N, ffn].
template <class T>
struct MlpContext {
  ContextMark mark;
  LinearContext<T> c_fc, c_proj;
  std::optional<SavedActivation<T>> pre;
};

// Attention: its linears' contexts, qkv [N, 3h] (this rank's heads) and the fused attention's log-sum-exp of each
// query row, [sequences*heads*s] in T (no probabilities: backward rebuilds them, layers/attention_core.hpp).
template <class T>
struct AttentionContext {
  ContextMark mark;
  LinearContext<T> c_attn, c_proj;
  std::optional<SavedActivation<T>> qkv;
  Tensor<T> lse;
  std::int64_t seq = 0;
  Pass pass;  // the forward's: backward regenerates its dropout masks
};

// A transformer block under its recomputation policy: the four parts' contexts (none, selective), or only the input
// [N, h] in T (full).
template <class T>
struct BlockContext {
  ContextMark mark;
  Recompute policy = Recompute::none;
  std::int64_t seq = 0;
  Pass pass;
  LayerNormContext<T> ln_1, ln_2;
  AttentionContext<T> attn;
  MlpContext<T> mlp;
  std::optional<DistMatrix<T>> input;  // full recomputation only
};

// Calls f(tensor) for every non-empty tensor a context holds (a Tensor<T>& or a Tensor<bf16>&), in a fixed order:
// what moves when a context is offloaded to host memory and back (layers/spill.hpp). A context made of others walks
// them, so that a new kind of context is walked by its own overload.
namespace detail {
template <class T, class F>
void for_each_saved_tensor(Tensor<T>& t, F&& f) {
  if (t.numel() > 0) f(t);
}
template <class T, class F>
void for_each_saved_tensor(std::optional<SavedActivation<T>>& s, F&& f) {
  if (!s) return;
  for_each_saved_tensor(s->storage(), f);
  for_each_saved_tensor(s->bf16_storage(), f);
}
}  // namespace detail

template <class T, class F>
void for_each_saved_tensor(LinearContext<T>& c, F&& f) {
  detail::for_each_saved_tensor(c.x, f);
}
template <class T, class F>
void for_each_saved_tensor(LayerNormContext<T>& c, F&& f) {
  detail::for_each_saved_tensor(c.xhat, f);
  detail::for_each_saved_tensor(c.rstd, f);
}
template <class T, class F>
void for_each_saved_tensor(AttentionContext<T>& c, F&& f) {
  for_each_saved_tensor(c.c_attn, f);
  for_each_saved_tensor(c.c_proj, f);
  detail::for_each_saved_tensor(c.qkv, f);
  detail::for_each_saved_tensor(c.lse, f);
}
template <class T, class F>
void for_each_saved_tensor(MlpContext<T>& c, F&& f) {
  for_each_saved_tensor(c.c_fc, f);
  for_each_saved_tensor(c.c_proj, f);
  detail::for_each_saved_tensor(c.pre, f);
}
template <class T, class F>
void for_each_saved_tensor(BlockContext<T>& c, F&& f) {
  for_each_saved_tensor(c.ln_1, f);
  for_each_saved_tensor(c.ln_2, f);
  for_each_saved_tensor(c.attn, f);
  for_each_saved_tensor(c.mlp, f);
  if (c.input) detail::for_each_saved_tensor(c.input->storage(), f);
}

// The token embedding: the token ids and token types (every rank holds the replica's b*s of each; no types: empty), the
// pass, and the embeddings' norm's context (BERT's ln_e; empty without it).
template <class T>
struct EmbeddingContext {
  ContextMark mark;
  std::vector<int> tokens, token_types;
  std::int64_t seq = 0;
  Pass pass;
  LayerNormContext<T> ln_e;
};

// The LM head: its input x [N, h] and dlogits [N, vocab] (bf16 under mixed precision).
template <class T>
struct LmHeadContext {
  ContextMark mark;
  std::optional<SavedActivation<T>> x, dlogits;
};

// A GPT's micro-batch through one stage (model/gpt.hpp): the embedding's, every block's, ln_f's and the LM head's
// contexts (on a pipeline's stage, those of the chunk's parts it holds).
template <class T>
struct GptContext {
  ContextMark mark;
  bool summed_over_replicas = false;  // the loss a mean over the whole batch's predicted positions (Gpt::Mean)
  EmbeddingContext<T> embedding;
  std::vector<BlockContext<T>> blocks;
  MlpContext<T> transform;  // BERT's head transform's (BlockConfig::head_transform), else empty
  LayerNormContext<T> ln_f;
  LmHeadContext<T> head;
};

}  // namespace optimus

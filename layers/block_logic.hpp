// The logic the 2D and 1D layers share, written once over their parts (internal header):
//   mlp   : y = c_proj(gelu(c_fc(x))), saving GELU's input (c_fc's output) for its derivative;
//   block : x1 = x + dropout(attn(ln_1(x))), y = x1 + dropout(mlp(ln_2(x1))), and its backward, with dropout
//           masks regenerated from (seed, step, layer, site).
#pragma once

#include <optional>
#include <utility>

#include "attention_core.hpp"
#include "optimus/core/error.hpp"
#include "optimus/layers/attention.hpp"
#include "optimus/core/gpt_config.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/layers/dropout.hpp"
#include "optimus/layers/pass.hpp"

namespace optimus::detail {

template <class T, class Fc, class Proj>
DistMatrix<T> mlp_forward(Fc& c_fc, Proj& c_proj, const DistMatrix<T>& x, const Pass& pass,
                          std::optional<SavedActivation<T>>& saved_pre) {
  GeluOutput<T> fc = c_fc.forward_gelu(x, pass);  // GELU fused into c_fc's GEMM where the device offers it
  DistMatrix<T> y = c_proj.forward(fc.y, pass);
  if (pass.training) saved_pre.emplace(std::move(fc.pre), MemoryKind::activations);  // bf16 under mixed precision
  return y;
}

template <class T, class Fc, class Proj>
DistMatrix<T> mlp_backward(Fc& c_fc, Proj& c_proj, const DistMatrix<T>& dy, std::optional<SavedActivation<T>>& saved_pre) {
  OPTIMUS_CHECK(saved_pre.has_value(), "mlp: backward without a training forward");
  DistMatrix<T> dact = c_proj.backward(dy);
  Tensor<T> widened;  // GELU's input in T when kept in bf16
  ops::gelu_backward<T>(saved_pre->values(widened), dact.local(), dact.local(), saved_pre->grid().queue);
  saved_pre.reset();
  return c_fc.backward(dact);
}

// Attention around the local core: qkv = c_attn(x); merged [N, merged_cols] = attention of this rank's heads;
// y = c_proj(merged). A training pass saves qkv and the probabilities in `saved`.
template <class T, class QkvLinear, class ProjLinear>
DistMatrix<T> attention_forward(QkvLinear& c_attn, ProjLinear& c_proj, const DistMatrix<T>& x,
                                std::int64_t merged_cols, const AttentionGeometry& g, const Pass& pass,
                                AttentionSaved<T>& saved) {
  DistMatrix<T> qkv = c_attn.forward(x, pass);
  const Shape all_tiles{g.batches * g.heads * g.seq, g.seq};
  // The probabilities are kept for backward only, in bf16 under mixed precision.
  const bool half = SavedActivation<T>::keeps_bf16(x.grid());
  const MemoryTag kept = x.grid().tag(MemoryKind::activations);
  Tensor<T> probs = pass.training && !half ? Tensor<T>(all_tiles, kept, Init::none) : Tensor<T>();
  Tensor<bf16> probs_bf16 = pass.training && half ? Tensor<bf16>(all_tiles, kept, Init::none) : Tensor<bf16>();
  DistMatrix<T> merged(x.grid(), x.rows(), merged_cols);
  attention_core_forward<T>(g, x.grid(), std::as_const(qkv).local(), {probs.view(), probs_bf16.view()},
                            merged.local());
  DistMatrix<T> y = c_proj.forward(merged, pass);
  if (pass.training) {
    saved.qkv.emplace(std::move(qkv), MemoryKind::activations);
    saved.probs = std::move(probs);
    saved.probs_bf16 = std::move(probs_bf16);
    saved.seq = g.seq;
    saved.step = pass.step;
  }
  return y;
}

// Its backward, with the geometry of the saved forward; frees what was saved.
template <class T, class QkvLinear, class ProjLinear>
DistMatrix<T> attention_backward(QkvLinear& c_attn, ProjLinear& c_proj, const DistMatrix<T>& dy,
                                 const AttentionGeometry& g, AttentionSaved<T>& saved) {
  const DistMatrix<T> dmerged = c_proj.backward(dy);
  DistMatrix<T> dqkv(dy.grid(), dy.rows(), saved.qkv->cols());
  Tensor<T> widened;  // qkv in T when kept in bf16
  attention_core_backward<T>(g, dy.grid(), saved.qkv->values(widened),
                             {std::as_const(saved.probs).view(), std::as_const(saved.probs_bf16).view()},
                             dmerged.local(), dqkv.local());
  saved.qkv.reset();
  saved.probs.reset();
  saved.probs_bf16.reset();
  return c_attn.backward(dqkv);
}

// The parts of a pre-LayerNorm block and what its dropouts need.
template <class Ln, class Attn, class Mlp>
struct BlockParts {
  Ln& ln_1;
  Attn& attn;
  Ln& ln_2;
  Mlp& mlp;
  const GptConfig& config;
  std::int64_t layer;
};

template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> block_forward(const BlockParts<Ln, Attn, Mlp>& b, const DistMatrix<T>& x, std::int64_t seq,
                            const Pass& pass) {
  const double p = pass.training ? b.config.dropout : 0.0;
  const auto layer = static_cast<std::uint64_t>(b.layer);
  DistMatrix<T> a = b.attn.forward(b.ln_1.forward(x, pass), seq, pass);
  apply_dropout(a, p, b.config.seed, dropout_stream(pass.step, layer, DropoutSite::attention_residual));
  ops::axpby<T>(T(1), x.local(), T(1), a.local(), x.grid().queue);  // a = x1
  DistMatrix<T> m = b.mlp.forward(b.ln_2.forward(a, pass), pass);
  apply_dropout(m, p, b.config.seed, dropout_stream(pass.step, layer, DropoutSite::mlp_residual));
  ops::axpby<T>(T(1), a.local(), T(1), m.local(), a.grid().queue);  // m = y
  return m;
}

template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> block_backward(const BlockParts<Ln, Attn, Mlp>& b, std::uint64_t step, const DistMatrix<T>& dy) {
  const auto layer = static_cast<std::uint64_t>(b.layer);
  DistMatrix<T> d = dy.clone();
  apply_dropout(d, b.config.dropout, b.config.seed, dropout_stream(step, layer, DropoutSite::mlp_residual));
  DistMatrix<T> dx1 = b.ln_2.backward(b.mlp.backward(d));
  ops::axpby<T>(T(1), dy.local(), T(1), dx1.local(), dy.grid().queue);
  d = dx1.clone();
  apply_dropout(d, b.config.dropout, b.config.seed, dropout_stream(step, layer, DropoutSite::attention_residual));
  DistMatrix<T> dx = b.ln_1.backward(b.attn.backward(d));
  ops::axpby<T>(T(1), dx1.local(), T(1), dx.local(), dx1.grid().queue);
  return dx;
}

}  // namespace optimus::detail

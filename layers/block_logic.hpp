// The logic the 2D and 1D layers share, written once over their parts (internal header):
//   mlp      : y = c_proj(act(c_fc(x))), act GELU (tanh or erf) or SwiGLU (silu(gate) * up of c_fc's [gate | up]),
//              saving the activation's input (c_fc's output) for its derivative;
//   attention: qkv = c_attn(x) (its queries and keys turned by rotary positions where the geometry says), the local
//              fused attention core (grouped-query attention: the key/value heads widened to one per query head for
//              it, their gradients summed back), y = c_proj(merged); qkv and the core's log-sum-exps are saved, the
//              probabilities rebuilt from them in backward;
//   block    : x1 = x + dropout(attn(ln_1(x))), y = x1 + dropout(mlp(ln_2(x1))), and its backward, with dropout
//              masks regenerated from (seed, step, layer, site), under a recomputation policy (recompute.hpp).
// Every forward fills a context (context.hpp) and every backward consumes one. A backward given `later` computes the
// input gradient now and queues the weight gradients there (weight_gradients.hpp); given null, it does both now.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "attention_core.hpp"
#include "optimus/layers/finite_check.hpp"
#include "optimus/core/error.hpp"
#include "optimus/config/gpt_config.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/dropout.hpp"
#include "optimus/layers/activation_output.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/weight_gradients.hpp"

namespace optimus::detail {

// SwiGLU of c_fc's output gu [N, 2f] (each rank's columns [gate | up], matching): y [N, f] = silu(gate) * up, kept as
// c_proj keeps its input, and gu kept for the backward — under mixed precision both in bf16, written by one kernel
// (ops::swiglu_forward into bf16), as GELU's are.
template <class T>
ActivationOutput<T> swiglu_forward(DistMatrix<T> gu, const Pass& pass) {
  const Grid grid = gu.grid();
  const MemoryKind kept = pass.training ? MemoryKind::activations : MemoryKind::workspace;
  SavedActivation<T> y = SavedActivation<T>::uninitialized(grid, gu.rows(), gu.cols() / 2, kept);
  if constexpr (std::is_same_v<T, float>) {
    if (y.is_bf16()) {
      SavedActivation<T> pre = SavedActivation<T>::uninitialized(grid, gu.rows(), gu.cols(), kept);
      ops::swiglu_forward(std::as_const(gu).local(), y.bf16_storage().view(), pre.bf16_storage().view(),
                          grid.queue());
      return {std::move(y), std::move(pre)};
    }
  }
  ops::swiglu_forward<T>(std::as_const(gu).local(), y.storage().view(), grid.queue());
  return {std::move(y), SavedActivation<T>(std::move(gu), kept)};
}

// The exact GELU of c_fc's output pre [N, f]: y = pre Phi(pre), both kept as c_proj keeps its input (under mixed
// precision each the bf16 cast of its value in T).
template <class T>
ActivationOutput<T> gelu_erf_forward(DistMatrix<T> pre, const Pass& pass) {
  const Grid grid = pre.grid();
  const MemoryKind kept = pass.training ? MemoryKind::activations : MemoryKind::workspace;
  DistMatrix<T> y = DistMatrix<T>::uninitialized(grid, pre.rows(), pre.cols(), kept);
  ops::gelu_erf_forward<T>(std::as_const(pre).local(), y.local(), grid.queue());
  return {SavedActivation<T>(std::move(y), kept), SavedActivation<T>(std::move(pre), kept)};
}

// The MLP's activation of c_fc's output: GELU fused into c_fc's GEMM where the device offers it; the exact GELU and
// SwiGLU after it. x: a DistMatrix<T>, or a SavedActivation<T> that c_fc takes over.
template <class T, class Fc, class X>
ActivationOutput<T> activation_forward(Fc& c_fc, MlpKind kind, X&& x, const Pass& pass, MlpContext<T>& saved) {
  switch (kind) {
    case MlpKind::gelu: return c_fc.forward_gelu(std::forward<X>(x), pass, saved.c_fc);
    case MlpKind::gelu_erf: return gelu_erf_forward(c_fc.forward(std::forward<X>(x), pass, saved.c_fc), pass);
    case MlpKind::swiglu: break;
  }
  return swiglu_forward(c_fc.forward(std::forward<X>(x), pass, saved.c_fc), pass);
}

// x: a DistMatrix<T>, or a SavedActivation<T> that c_fc takes over (LayerNorm2D::forward_saved).
template <class T, class Fc, class Proj, class X>
DistMatrix<T> mlp_forward(Fc& c_fc, Proj& c_proj, MlpKind kind, X&& x, const Pass& pass, MlpContext<T>& saved) {
  saved = MlpContext<T>{};
  const Grid grid = x.grid();  // a handle: x may be moved into c_fc's context
  ActivationOutput<T> fc = activation_forward(c_fc, kind, std::forward<X>(x), pass, saved);
  DistMatrix<T> y = c_proj.forward(std::move(fc.y), pass, saved.c_proj);  // taken over, as kept
  if (pass.training) {
    saved.pre.emplace(std::move(fc.pre));  // bf16 under mixed precision
    saved.mark = ContextMark(grid);
  }
  return y;
}

// layer.backward(saved, dy), or split with the weight gradients queued in *later.
template <class T, class Layer, class Context>
DistMatrix<T> backward_of(Layer& layer, Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  if (later == nullptr) return layer.backward(std::move(saved), dy);
  return layer.backward(std::move(saved), dy, *later);
}

// dact = dact * gelu'(pre), reading GELU's input as kept (bf16 under mixed precision: no widened copy).
template <class T>
void gelu_backward(const SavedActivation<T>& pre, DistMatrix<T>& dact) {
  const ops::Queue queue = dact.grid().queue();
  if constexpr (std::is_same_v<T, float>) {
    if (pre.is_bf16()) {
      ops::gelu_backward(pre.bf16_block(), std::as_const(dact).local(), dact.local(), queue);
      return;
    }
  }
  ops::gelu_backward<T>(pre.block(), std::as_const(dact).local(), dact.local(), queue);
}

// dact = dact * gelu_erf'(pre), reading GELU's input as kept (widened from bf16 under mixed precision).
template <class T>
void gelu_erf_backward(const SavedActivation<T>& pre, DistMatrix<T>& dact) {
  Tensor<T> scratch;
  ops::gelu_erf_backward<T>(pre.values(scratch), std::as_const(dact).local(), dact.local(), dact.grid().queue());
}

// dgu [N, 2f] = SwiGLU's backward of dact [N, f] on gu as kept (bf16 under mixed precision: no widened copy).
template <class T>
DistMatrix<T> swiglu_backward(const SavedActivation<T>& gu, const DistMatrix<T>& dact) {
  const Grid& grid = dact.grid();
  DistMatrix<T> dgu = DistMatrix<T>::uninitialized(grid, gu.rows(), gu.cols(), MemoryKind::workspace);
  if constexpr (std::is_same_v<T, float>) {
    if (gu.is_bf16()) {
      ops::swiglu_backward(gu.bf16_block(), dact.local(), dgu.local(), grid.queue());
      return dgu;
    }
  }
  ops::swiglu_backward<T>(gu.block(), dact.local(), dgu.local(), grid.queue());
  return dgu;
}

template <class T, class Fc, class Proj>
DistMatrix<T> mlp_backward(Fc& c_fc, Proj& c_proj, MlpKind kind, MlpContext<T> saved, const DistMatrix<T>& dy,
                           WeightGradients* later) {
  saved.mark.check(dy.grid(), "mlp");
  DistMatrix<T> dact = backward_of(c_proj, std::move(saved.c_proj), dy, later);
  switch (kind) {
    case MlpKind::gelu: gelu_backward(*saved.pre, dact); break;
    case MlpKind::gelu_erf: gelu_erf_backward(*saved.pre, dact); break;
    case MlpKind::swiglu: dact = swiglu_backward(*saved.pre, dact); break;
  }
  saved.pre.reset();
  return backward_of(c_fc, std::move(saved.c_fc), dact, later);
}

// The rotation of this rank's heads (forward, or `inverse` for the backward).
inline ops::Rotary rotary_of(const AttentionGeometry& g, bool inverse) {
  return {.seq = g.seq, .heads = g.heads, .kv_heads = g.kv_heads, .theta = g.rope->theta, .inverse = inverse};
}

// qkv [N, (heads + 2 kv_heads) d] as the attention core reads it: itself (multi-head), or under grouped-query attention
// widened to a key/value head per query head [N, 3 heads d] (ops::repeat_kv) in `storage`, kept as qkv is.
template <class T>
const SavedActivation<T>& per_query_head(const AttentionGeometry& g, const Grid& grid, const SavedActivation<T>& qkv,
                                         std::optional<SavedActivation<T>>& storage) {
  if (g.kv_heads == g.heads) return qkv;
  const ops::KvHeads kv{.heads = g.heads, .kv_heads = g.kv_heads};
  const std::int64_t cols = qkv.cols() / (g.heads + 2 * g.kv_heads) * 3 * g.heads;  // global: the layout's split
  storage.emplace(SavedActivation<T>::uninitialized(grid, qkv.rows(), cols, MemoryKind::workspace));
  if constexpr (std::is_same_v<T, float>) {
    if (qkv.is_bf16()) {
      ops::repeat_kv(qkv.bf16_block(), storage->bf16_storage().view(), kv, grid.queue());
      return *storage;
    }
  }
  ops::repeat_kv<T>(qkv.block(), storage->storage().view(), kv, grid.queue());
  return *storage;
}

// Attention around the local core: qkv = c_attn(x); merged [N, merged_cols] = attention of this rank's heads;
// y = c_proj(merged). A training pass saves qkv and the core's log-sum-exps in `saved`. The core reads qkv as saved
// (bf16 under mixed precision, as the GEMMs take their operands), so that backward rebuilds from the same values the
// probabilities the forward summed.
// x: a DistMatrix<T>, or a SavedActivation<T> that c_attn takes over (LayerNorm2D::forward_saved).
template <class T, class QkvLinear, class ProjLinear, class X>
DistMatrix<T> attention_forward(QkvLinear& c_attn, ProjLinear& c_proj, X&& x, std::int64_t merged_cols,
                                const AttentionGeometry& g, const Pass& pass, AttentionContext<T>& saved) {
  saved = AttentionContext<T>{};
  const Grid grid = x.grid();  // a handle: x may be moved into c_attn's context
  const std::int64_t rows = x.rows();
  DistMatrix<T> projected = c_attn.forward(std::forward<X>(x), pass, saved.c_attn);
  // Rotary positions turn the queries and keys in place, before qkv is kept (in bf16 under mixed precision).
  if (g.rope) ops::rotary<T>(projected.local(), rotary_of(g, false), grid.queue());
  SavedActivation<T> qkv(std::move(projected), pass.training ? MemoryKind::activations : MemoryKind::workspace);
  if (pass.training) saved.lse = Tensor<T>(Shape{g.batches * g.heads * g.seq}, grid.tag(MemoryKind::activations),
                                           Init::none);
  // Written as c_proj keeps its input (bf16 under mixed precision), and taken over by it.
  SavedActivation<T> merged = SavedActivation<T>::uninitialized(
      grid, rows, merged_cols, pass.training ? MemoryKind::activations : MemoryKind::workspace);
  {
    std::optional<SavedActivation<T>> widened;
    attention_core_forward<T>(g, grid, per_query_head(g, grid, qkv, widened), saved.lse.view(), merged);
  }
  DistMatrix<T> y = c_proj.forward(std::move(merged), pass, saved.c_proj);
  if (pass.training) {
    saved.qkv.emplace(std::move(qkv));
    saved.seq = g.seq;
    saved.pass = pass;
    saved.mark = ContextMark(grid);
  }
  return y;
}

// Its backward, with the geometry of the saved forward (g).
template <class T, class QkvLinear, class ProjLinear>
DistMatrix<T> attention_backward(QkvLinear& c_attn, ProjLinear& c_proj, AttentionContext<T> saved,
                                 const DistMatrix<T>& dy, const AttentionGeometry& g, WeightGradients* later) {
  const Grid& grid = dy.grid();
  saved.mark.check(grid, "attention");
  // The core's row terms D read the forward's output, which c_proj keeps as its input: c_proj's weight gradients are
  // queued (in `later`, or in `own` and run once D is taken), so that the input stays alive past its input gradient,
  // read through views taken before the context moves into the queue (a move keeps a tensor's storage). Split or not,
  // a linear's gradients are bitwise the same (weight_gradients.hpp).
  const TensorView<const T> merged = saved.c_proj.x->block();
  const TensorView<const bf16> merged16 = saved.c_proj.x->bf16_block();
  WeightGradients own;
  const DistMatrix<T> dmerged = c_proj.backward(std::move(saved.c_proj), dy, later != nullptr ? *later : own);
  const Tensor<T> delta = attention_core_delta<T>(g, grid, merged, merged16, dmerged.local());
  own.run();
  // dq, dk and dv: every element written by the core (overwritten); under grouped-query attention the core's
  // gradients of the widened key/value heads, summed back into their heads.
  DistMatrix<T> dqkv = DistMatrix<T>::uninitialized(grid, dy.rows(), saved.qkv->cols(), MemoryKind::workspace);
  {
    std::optional<SavedActivation<T>> widened;
    const SavedActivation<T>& full = per_query_head(g, grid, *saved.qkv, widened);
    std::optional<DistMatrix<T>> dfull;
    if (widened) dfull.emplace(DistMatrix<T>::uninitialized(grid, dy.rows(), full.cols(), MemoryKind::workspace));
    attention_core_backward<T>(g, grid, full, std::as_const(saved.lse).view(), delta.view(), dmerged.local(),
                               dfull ? dfull->local() : dqkv.local());
    if (dfull) {
      ops::sum_kv<T>(std::as_const(*dfull).local(), dqkv.local(), {.heads = g.heads, .kv_heads = g.kv_heads},
                     grid.queue());
    }
  }
  // The gradients of the turned queries and keys, turned back: those of c_attn's output.
  if (g.rope) ops::rotary<T>(dqkv.local(), rotary_of(g, true), grid.queue());
  saved.qkv.reset();
  saved.lse.reset();
  return backward_of(c_attn, std::move(saved.c_attn), dqkv, later);
}

// The parts of a block and what its dropouts need (config.block says where its norms sit).
template <class Ln, class Attn, class Mlp>
struct BlockParts {
  Ln& ln_1;
  Attn& attn;
  Ln& ln_2;
  Mlp& mlp;
  const GptConfig& config;  // dropout, seed
  std::int64_t layer;
};
// (Aggregate deduction spelled out: clang 14 does not deduce an aggregate's arguments.)
template <class Ln, class Attn, class Mlp>
BlockParts(Ln&, Attn&, Ln&, Mlp&, const GptConfig&, std::int64_t) -> BlockParts<Ln, Attn, Mlp>;

// x [N, h] with N = b*s: row r is global row pass.first_sequence*s + r (dropout masks).
inline std::int64_t first_row(const Pass& pass, std::int64_t seq) {
  return pass.first_sequence * seq;
}

// The block's layers forward, filling `saved`'s four parts (and its pass and sequence length, for the dropout masks
// of backward). Each residual add is fused with the dropout before it (ops::dropout_residual), and the first one also
// takes the row sums that ln_2 starts from (a LayerNorm's).
template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> block_layers_forward(const BlockParts<Ln, Attn, Mlp>& b, const DistMatrix<T>& x, std::int64_t seq,
                                   const Pass& pass, BlockContext<T>& saved) {
  saved.seq = seq;
  saved.pass = pass;
  const double p = pass.training ? b.config.dropout : 0.0;
  const auto layer = static_cast<std::uint64_t>(b.layer);
  const std::int64_t row0 = first_row(pass, seq);
  const std::string name = "h." + std::to_string(b.layer) + ".";
  const ops::Queue& queue = x.grid().queue();
  // The LayerNorms' outputs are written as the linear layers after them keep their inputs (bf16 under mixed
  // precision), and taken over by them.
  SavedActivation<T> n1 = b.ln_1.forward_saved(x, pass, saved.ln_1);
  check_finite(n1, name + "ln_1 forward output");
  DistMatrix<T> a = b.attn.forward(std::move(n1), seq, pass, saved.attn);
  check_finite(a, name + "attn forward output");
  // [N/q] for a LayerNorm ln_2; RMSNorm takes none (the mean is taken as 0).
  const bool sums = b.ln_2.spec().centered();
  Tensor<T> x1_sums = sums ? Tensor<T>(Shape{a.local_rows()}, x.grid().tag(MemoryKind::workspace), Init::none)
                           : Tensor<T>();
  ops::dropout_residual<T>(
      x.local(), a.local(),
      dropout_mask(a, row0, p, b.config.seed, dropout_stream(pass.step, layer, DropoutSite::attention_residual)),
      sums ? x1_sums.view() : TensorView<T>{}, queue);  // a = x1 = x + dropout(a)
  SavedActivation<T> n2 = b.ln_2.forward_saved(a, std::move(x1_sums), pass, saved.ln_2);
  check_finite(n2, name + "ln_2 forward output");
  DistMatrix<T> m = b.mlp.forward(std::move(n2), pass, saved.mlp);
  check_finite(m, name + "mlp forward output");
  ops::dropout_residual<T>(
      a.local(), m.local(),
      dropout_mask(m, row0, p, b.config.seed, dropout_stream(pass.step, layer, DropoutSite::mlp_residual)),
      TensorView<T>{}, queue);  // m = y = x1 + dropout(m)
  return m;
}

// A post-LayerNorm block's layers forward (BlockConfig::post_norm, BERT's): x1 = ln_1(x + dropout(attn(x))),
// y = ln_2(x1 + dropout(mlp(x1))), filling `saved`'s four parts. The sublayers take their inputs (x, x1) as they are
// and keep their own copies; the residual adds are fused with the dropouts before them.
template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> post_norm_layers_forward(const BlockParts<Ln, Attn, Mlp>& b, const DistMatrix<T>& x, std::int64_t seq,
                                       const Pass& pass, BlockContext<T>& saved) {
  const double p = pass.training ? b.config.dropout : 0.0;
  const auto layer = static_cast<std::uint64_t>(b.layer);
  const std::int64_t row0 = first_row(pass, seq);
  const std::string name = "h." + std::to_string(b.layer) + ".";
  const ops::Queue& queue = x.grid().queue();
  DistMatrix<T> a = b.attn.forward(x, seq, pass, saved.attn);
  check_finite(a, name + "attn forward output");
  ops::dropout_residual<T>(
      x.local(), a.local(),
      dropout_mask(a, row0, p, b.config.seed, dropout_stream(pass.step, layer, DropoutSite::attention_residual)),
      TensorView<T>{}, queue);  // a = x + dropout(a)
  const DistMatrix<T> x1 = b.ln_1.forward(a, pass, saved.ln_1);
  check_finite(x1, name + "ln_1 forward output");
  DistMatrix<T> m = b.mlp.forward(x1, pass, saved.mlp);
  check_finite(m, name + "mlp forward output");
  ops::dropout_residual<T>(
      x1.local(), m.local(),
      dropout_mask(m, row0, p, b.config.seed, dropout_stream(pass.step, layer, DropoutSite::mlp_residual)),
      TensorView<T>{}, queue);  // m = x1 + dropout(m)
  DistMatrix<T> y = b.ln_2.forward(m, pass, saved.ln_2);
  check_finite(y, name + "ln_2 forward output");
  return y;
}

// The gradient g through the dropout of `stream`: g itself without dropout, else a dropped copy held in `storage`
// (g stays whole: it also continues along the residual path).
template <class T>
const DistMatrix<T>& through_dropout(const DistMatrix<T>& g, std::int64_t first_row, double p, std::uint64_t seed,
                                     std::uint64_t stream, std::optional<DistMatrix<T>>& storage) {
  if (p == 0.0) return g;
  storage.emplace(DistMatrix<T>::uninitialized(g.grid(), g.rows(), g.cols(), MemoryKind::workspace));
  ops::dropout_copy<T>(g.local(), storage->local(), dropout_mask(g, first_row, p, seed, stream), g.grid().queue());
  return *storage;
}

// What a block's backward needs of its forward's pass: the dropout masks' sites, and its name for the finite checks.
struct BackwardSites {
  std::uint64_t layer, step, seed;
  std::int64_t row0;
  double p;
  std::string name;

  template <class T, class Ln, class Attn, class Mlp>
  static BackwardSites of(const BlockParts<Ln, Attn, Mlp>& b, const BlockContext<T>& saved) {
    return {.layer = static_cast<std::uint64_t>(b.layer), .step = saved.pass.step, .seed = b.config.seed,
            .row0 = first_row(saved.pass, saved.seq), .p = b.config.dropout,
            .name = "h." + std::to_string(b.layer) + "."};
  }
  // g through the dropout at `site` (through_dropout).
  template <class T>
  const DistMatrix<T>& dropped(const DistMatrix<T>& g, DropoutSite site, std::optional<DistMatrix<T>>& storage) const {
    return through_dropout(g, row0, p, seed, dropout_stream(step, layer, site), storage);
  }
};

// The block's layers backward, consuming `saved`'s four parts. The residual paths' gradients are added by the
// LayerNorms' dx kernels (LayerNorm2D::backward_plus).
template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> block_layers_backward(const BlockParts<Ln, Attn, Mlp>& b, BlockContext<T>& saved,
                                    const DistMatrix<T>& dy, WeightGradients* later) {
  const BackwardSites at = BackwardSites::of(b, saved);
  const std::string& name = at.name;
  std::optional<DistMatrix<T>> mlp_dropped, attn_dropped;
  const DistMatrix<T>& d_mlp = at.dropped(dy, DropoutSite::mlp_residual, mlp_dropped);
  const DistMatrix<T> dm = backward_of(b.mlp, std::move(saved.mlp), d_mlp, later);
  check_finite(dm, name + "mlp backward input gradient");
  mlp_dropped.reset();
  const DistMatrix<T> dx1 = b.ln_2.backward_plus(std::move(saved.ln_2), dm, dy, later);  // + dy
  check_finite(dx1, name + "ln_2 backward input gradient");
  const DistMatrix<T>& d_attn = at.dropped(dx1, DropoutSite::attention_residual, attn_dropped);
  const DistMatrix<T> da = backward_of(b.attn, std::move(saved.attn), d_attn, later);
  check_finite(da, name + "attn backward input gradient");
  attn_dropped.reset();
  DistMatrix<T> dx = b.ln_1.backward_plus(std::move(saved.ln_1), da, dx1, later);  // + dx1
  check_finite(dx, name + "ln_1 backward input gradient");
  return dx;
}

// One half of a post-LayerNorm block backward, from the gradient g of its output norm(r + dropout(sub(r))): through
// the norm (ds, the residual sum's gradient), then the dropout and the sublayer, plus ds along the residual path: the
// gradient of r.
template <class T, class Norm, class Sublayer>
DistMatrix<T> post_norm_half_backward(Norm& norm, typename Norm::Context norm_saved, Sublayer& sub,
                                      typename Sublayer::Context sub_saved, const DistMatrix<T>& g,
                                      const BackwardSites& at, DropoutSite site, WeightGradients* later,
                                      const std::string& norm_name, const std::string& sub_name) {
  const DistMatrix<T> ds = backward_of(norm, std::move(norm_saved), g, later);
  check_finite(ds, at.name + norm_name + " backward input gradient");
  std::optional<DistMatrix<T>> dropped;
  DistMatrix<T> dr = backward_of(sub, std::move(sub_saved), at.dropped(ds, site, dropped), later);
  check_finite(dr, at.name + sub_name + " backward input gradient");
  ops::axpby<T>(T(1), ds.local(), T(1), dr.local(), g.grid().queue());  // + the residual path's
  return dr;
}

// A post-LayerNorm block's layers backward, consuming `saved`'s four parts.
template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> post_norm_layers_backward(const BlockParts<Ln, Attn, Mlp>& b, BlockContext<T>& saved,
                                        const DistMatrix<T>& dy, WeightGradients* later) {
  const BackwardSites at = BackwardSites::of(b, saved);
  const DistMatrix<T> dx1 = post_norm_half_backward(b.ln_2, std::move(saved.ln_2), b.mlp, std::move(saved.mlp), dy,
                                                    at, DropoutSite::mlp_residual, later, "ln_2", "mlp");
  return post_norm_half_backward(b.ln_1, std::move(saved.ln_1), b.attn, std::move(saved.attn), dx1, at,
                                 DropoutSite::attention_residual, later, "ln_1", "attn");
}

// The block's layers, pre- or post-LayerNorm as the config says.
template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> any_layers_forward(const BlockParts<Ln, Attn, Mlp>& b, const DistMatrix<T>& x, std::int64_t seq,
                                 const Pass& pass, BlockContext<T>& saved) {
  if (!b.config.block.post_norm) return block_layers_forward(b, x, seq, pass, saved);
  saved.seq = seq;
  saved.pass = pass;
  return post_norm_layers_forward(b, x, seq, pass, saved);
}
template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> any_layers_backward(const BlockParts<Ln, Attn, Mlp>& b, BlockContext<T>& saved, const DistMatrix<T>& dy,
                                  WeightGradients* later) {
  return b.config.block.post_norm ? post_norm_layers_backward(b, saved, dy, later)
                                  : block_layers_backward(b, saved, dy, later);
}

// The block under `policy`: none and selective keep the parts' contexts (the same ones: selective recomputation drops
// the attention's probabilities, which the fused attention never keeps), full keeps only the input and drops the
// parts' contexts as soon as the forward is done.
template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> block_forward(const BlockParts<Ln, Attn, Mlp>& b, const DistMatrix<T>& x, std::int64_t seq,
                            const Pass& pass, Recompute policy, BlockContext<T>& saved) {
  saved = BlockContext<T>{};
  if (!pass.training) return any_layers_forward(b, x, seq, pass, saved);
  DistMatrix<T> y = [&] {
    if (policy != Recompute::full) return any_layers_forward(b, x, seq, pass, saved);
    saved.input.emplace(x.clone_as(MemoryKind::activations));
    BlockContext<T> transient;  // one block's activations, freed before the next block runs
    return any_layers_forward(b, x, seq, pass, transient);
  }();
  saved.policy = policy;
  saved.seq = seq;
  saved.pass = pass;
  saved.mark = ContextMark(x.grid());
  return y;
}

template <class T, class Ln, class Attn, class Mlp>
DistMatrix<T> block_backward(const BlockParts<Ln, Attn, Mlp>& b, BlockContext<T> saved, const DistMatrix<T>& dy,
                             WeightGradients* later) {
  saved.mark.check(dy.grid(), "h." + std::to_string(b.layer));
  if (saved.policy != Recompute::full) return any_layers_backward(b, saved, dy, later);
  BlockContext<T> again;  // the forward once more, from the saved input: bitwise the contexts it first made
  any_layers_forward(b, *saved.input, saved.seq, saved.pass, again);
  saved.input.reset();
  return any_layers_backward(b, again, dy, later);
}

}  // namespace optimus::detail

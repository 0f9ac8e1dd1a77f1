// The simulated device's kernels (src/core/accelerator_kernels.hpp): each queues the CPU kernel of the same
// operation (src/core/cpu_kernels.hpp, optimus/core/kernels.hpp) on the queue's stream, on the host storage behind
// its device operands — translated, and checked to lie in live allocations, when it is queued — declaring what it
// reads and writes for race detection. Results are the CPU's, bit for bit.
#include <tuple>
#include <utility>

#include "../core/accelerator_kernels.hpp"
#include "../core/cpu_kernels.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/sim/runtime.hpp"

namespace optimus::ops::detail {
namespace {

using sim::Access;

// An operand of a simulated kernel: a device view and whether the kernel writes it.
template <class T>
struct Arg {
  TensorView<T> view;
  bool writes;
};
template <class T>
Arg<const T> in(TensorView<const T> v) {
  return {v, false};
}
template <class T>
Arg<T> out(TensorView<T> v) {
  return {v, true};
}

// Queues work(host views of args...) on the queue's stream.
template <class Work, class... T>
void launch(const Queue& q, const char* name, Work work, Arg<T>... args) {
  sim::Runtime& device = static_cast<sim::Runtime&>(q.stream->runtime());
  sim::Stream& stream = device.own(*q.stream, name);
  std::vector<Access> accesses{(args.writes ? sim::writes(args.view) : sim::reads(args.view))...};
  stream.launch(name, std::move(accesses), [work, views = std::make_tuple(device.host_view(args.view, name)...)] {
    std::apply(work, views);
  });
}

class SimKernels final : public AcceleratorKernels {
 public:
  void to_bf16(TensorView<const float> x, TensorView<bf16> y, const Queue& q) const override {
    launch(q, "to_bf16", [](auto x_, auto y_) { cpu::to_bf16(x_, y_); }, in(x), out(y));
  }
  void to_f32(TensorView<const bf16> x, TensorView<float> y, const Queue& q) const override {
    launch(q, "to_f32", [](auto x_, auto y_) { cpu::to_f32(x_, y_); }, in(x), out(y));
  }
  void fill(TensorView<float> y, float value, const Queue& q) const override {
    launch(q, "fill", [value](auto y_) { cpu::fill<float>(y_, value); }, out(y));
  }
  void axpby(float alpha, TensorView<const float> x, float beta, TensorView<float> y, const Queue& q) const override {
    launch(q, "axpby", [alpha, beta](auto x_, auto y_) { cpu::axpby<float>(alpha, x_, beta, y_); }, in(x), out(y));
  }
  void add_row_broadcast(TensorView<const float> row, TensorView<float> y, const Queue& q) const override {
    launch(q, "add_row_broadcast", [](auto row_, auto y_) { cpu::add_row_broadcast<float>(row_, y_); }, in(row),
           out(y));
  }
  void column_sums(TensorView<const float> x, TensorView<float> out_, const Queue& q) const override {
    launch(q, "column_sums", [](auto x_, auto o) { cpu::column_sums<float>(x_, o); }, in(x), out(out_));
  }
  void column_sums(TensorView<const float> x, TensorView<float> out_, TensorView<bf16> x_bf16,
                   const Queue& q) const override {
    launch(q, "column_sums", [](auto x_, auto o, auto c) { cpu::column_sums(x_, o, c); }, in(x), out(out_),
           out(x_bf16));
  }
  void gelu_forward(TensorView<const float> x, TensorView<float> y, const Queue& q) const override {
    launch(q, "gelu_forward", [](auto x_, auto y_) { cpu::gelu_forward<float>(x_, y_); }, in(x), out(y));
  }
  void gelu_forward(TensorView<const float> x, TensorView<bf16> y, TensorView<bf16> x_kept,
                    const Queue& q) const override {
    launch(q, "gelu_forward", [](auto x_, auto y_, auto k_) { cpu::gelu_forward(x_, y_, k_); }, in(x), out(y),
           out(x_kept));
  }
  void gelu_backward(TensorView<const float> x, TensorView<const float> dy, TensorView<float> dx,
                     const Queue& q) const override {
    launch(q, "gelu_backward", [](auto x_, auto dy_, auto dx_) { cpu::gelu_backward<float>(x_, dy_, dx_); }, in(x),
           in(dy), out(dx));
  }
  void gelu_backward(TensorView<const bf16> x, TensorView<const float> dy, TensorView<float> dx,
                     const Queue& q) const override {
    launch(q, "gelu_backward", [](auto x_, auto dy_, auto dx_) { cpu::gelu_backward(x_, dy_, dx_); }, in(x), in(dy),
           out(dx));
  }
  void dropout(TensorView<float> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
               std::uint64_t stream, const Queue& q) const override {
    launch(q, "dropout", [=](auto x_) { cpu::dropout<float>(x_, row0, col0, p, seed, stream); }, out(x));
  }
  void dropout_residual(TensorView<const float> residual, TensorView<float> x, const DropoutMask& mask,
                        TensorView<float> row_sums, const Queue& q) const override {
    if (row_sums.rank() == 0) {
      launch(q, "dropout_residual",
             [mask](auto r, auto x_) { cpu::dropout_residual<float>(r, x_, mask, TensorView<float>{}); },
             in(residual), out(x));
      return;
    }
    launch(q, "dropout_residual", [mask](auto r, auto x_, auto s) { cpu::dropout_residual<float>(r, x_, mask, s); },
           in(residual), out(x), out(row_sums));
  }
  void rotary(TensorView<float> qkv, const Rotary& r, const Queue& q) const override {
    launch(q, "rotary", [r](auto x) { cpu::rotary<float>(x, r); }, out(qkv));
  }
  void swiglu_forward(TensorView<const float> gu, TensorView<float> y, const Queue& q) const override {
    launch(q, "swiglu_forward", [](auto g, auto y_) { cpu::swiglu_forward<float>(g, y_); }, in(gu), out(y));
  }
  void swiglu_forward(TensorView<const float> gu, TensorView<bf16> y, TensorView<bf16> gu_kept,
                      const Queue& q) const override {
    launch(q, "swiglu_forward", [](auto g, auto y_, auto k_) { cpu::swiglu_forward(g, y_, k_); }, in(gu), out(y),
           out(gu_kept));
  }
  void swiglu_backward(TensorView<const float> gu, TensorView<const float> dy, TensorView<float> dgu,
                       const Queue& q) const override {
    launch(q, "swiglu_backward", [](auto g, auto d, auto dg) { cpu::swiglu_backward<float>(g, d, dg); }, in(gu),
           in(dy), out(dgu));
  }
  void swiglu_backward(TensorView<const bf16> gu, TensorView<const float> dy, TensorView<float> dgu,
                       const Queue& q) const override {
    launch(q, "swiglu_backward", [](auto g, auto d, auto dg) { cpu::swiglu_backward(g, d, dg); }, in(gu), in(dy),
           out(dgu));
  }
  void repeat_kv(TensorView<const float> qkv, TensorView<float> full, const KvHeads& kv,
                 const Queue& q) const override {
    launch(q, "repeat_kv", [kv](auto x, auto f) { cpu::repeat_kv<float>(x, f, kv); }, in(qkv), out(full));
  }
  void repeat_kv(TensorView<const bf16> qkv, TensorView<bf16> full, const KvHeads& kv,
                 const Queue& q) const override {
    launch(q, "repeat_kv", [kv](auto x, auto f) { cpu::repeat_kv<bf16>(x, f, kv); }, in(qkv), out(full));
  }
  void sum_kv(TensorView<const float> dfull, TensorView<float> dqkv, const KvHeads& kv,
              const Queue& q) const override {
    launch(q, "sum_kv", [kv](auto f, auto d) { cpu::sum_kv<float>(f, d, kv); }, in(dfull), out(dqkv));
  }
  void dropout_copy(TensorView<const float> x, TensorView<float> y, const DropoutMask& mask,
                    const Queue& q) const override {
    launch(q, "dropout_copy", [mask](auto x_, auto y_) { cpu::dropout_copy<float>(x_, y_, mask); }, in(x), out(y));
  }
  void combine(TensorView<float> acc, TensorView<const float> x, math::Combine op, const Queue& q) const override {
    launch(q, "combine", [op](auto a, auto x_) { cpu::combine(a.data(), x_.data(), a.numel(), op); }, out(acc), in(x));
  }
  void combine(TensorView<double> acc, TensorView<const double> x, math::Combine op, const Queue& q) const override {
    launch(q, "combine", [op](auto a, auto x_) { cpu::combine(a.data(), x_.data(), a.numel(), op); }, out(acc), in(x));
  }

  void flash_attention_forward(TensorView<const float> qkv, const AttentionShape& shape, TensorView<float> out_,
                               TensorView<float> lse, const Queue& q) const override {
    attention_forward_into(qkv, shape, out_, lse, q);
  }
  void flash_attention_forward(TensorView<const float> qkv, const AttentionShape& shape, TensorView<bf16> out_,
                               TensorView<float> lse, const Queue& q) const override {
    attention_forward_into(qkv, shape, out_, lse, q);
  }
  void attention_delta(TensorView<const float> out_, TensorView<const float> dout, const AttentionShape& shape,
                       TensorView<float> delta, const Queue& q) const override {
    launch(q, "attention_delta", [shape](auto o, auto d, auto dl) { cpu::attention_delta<float>(o, d, shape, dl); },
           in(out_), in(dout), out(delta));
  }
  void attention_delta(TensorView<const bf16> out_, TensorView<const float> dout, const AttentionShape& shape,
                       TensorView<float> delta, const Queue& q) const override {
    launch(q, "attention_delta", [shape](auto o, auto d, auto dl) { cpu::attention_delta(o, d, shape, dl); },
           in(out_), in(dout), out(delta));
  }
  void flash_attention_backward(TensorView<const float> qkv, TensorView<const float> dout,
                                TensorView<const float> lse, TensorView<const float> delta,
                                const AttentionShape& shape, TensorView<float> dqkv, const Queue& q) const override {
    launch(q, "flash_attention_backward",
           [shape, math = q.math](auto x, auto d, auto l, auto dl, auto dx) {
             cpu::flash_attention_backward<float>(x, d, l, dl, shape, dx, math);
           },
           in(qkv), in(dout), in(lse), in(delta), out(dqkv));
  }
  void flash_attention_forward(TensorView<const bf16> qkv, const AttentionShape& shape, TensorView<bf16> out_,
                               TensorView<float> lse, const Queue& q) const override {
    launch(q, "flash_attention_forward",
           [shape](auto x, auto o, auto l) { cpu::flash_attention_forward(x, shape, o, l); }, in(qkv), out(out_),
           out(lse));
  }
  void flash_attention_backward(TensorView<const bf16> qkv, TensorView<const float> dout,
                                TensorView<const float> lse, TensorView<const float> delta,
                                const AttentionShape& shape, TensorView<float> dqkv, const Queue& q) const override {
    launch(q, "flash_attention_backward",
           [shape](auto x, auto d, auto l, auto dl, auto dx) { cpu::flash_attention_backward(x, d, l, dl, shape, dx); },
           in(qkv), in(dout), in(lse), in(delta), out(dqkv));
  }
  void row_sums(TensorView<const float> x, TensorView<float> out_, const Queue& q) const override {
    launch(q, "row_sums", [](auto x_, auto o) { cpu::row_sums(x_, o); }, in(x), out(out_));
  }
  void layernorm_square_deviations(TensorView<const float> x, TensorView<const float> row_sum, std::int64_t hidden,
                                   TensorView<float> out_, const Queue& q) const override {
    launch(q, "layernorm_square_deviations",
           [hidden](auto x_, auto s, auto o) { cpu::layernorm_square_deviations(x_, s, hidden, o); }, in(x),
           in(row_sum), out(out_));
  }
  void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum, TensorView<const float> sq_dev,
                           TensorView<const float> gamma, TensorView<const float> beta, const Normalization& norm,
                           TensorView<float> xhat, TensorView<float> rstd, TensorView<float> y,
                           const Queue& q) const override {
    normalize_into(x, row_sum, sq_dev, gamma, beta, norm, xhat, rstd, y, q);
  }
  void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum, TensorView<const float> sq_dev,
                           TensorView<const float> gamma, TensorView<const float> beta, const Normalization& norm,
                           TensorView<bf16> xhat, TensorView<float> rstd, TensorView<bf16> y,
                           const Queue& q) const override {
    normalize_into(x, row_sum, sq_dev, gamma, beta, norm, xhat, rstd, y, q);
  }
  void layernorm_backward_partials(TensorView<const float> dy, TensorView<const float> xhat,
                                   TensorView<const float> gamma, TensorView<float> dgamma, TensorView<float> dbeta,
                                   TensorView<float> sums, const Queue& q) const override {
    partials_into(dy, xhat, gamma, dgamma, dbeta, sums, q);
  }
  void layernorm_backward_partials(TensorView<const float> dy, TensorView<const bf16> xhat,
                                   TensorView<const float> gamma, TensorView<float> dgamma, TensorView<float> dbeta,
                                   TensorView<float> sums, const Queue& q) const override {
    partials_into(dy, xhat, gamma, dgamma, dbeta, sums, q);
  }
  void layernorm_backward_dx(TensorView<const float> dy, TensorView<const float> xhat, TensorView<const float> gamma,
                             TensorView<const float> rstd, TensorView<const float> sums, const Normalization& norm,
                             TensorView<const float> residual, TensorView<float> dx, const Queue& q) const override {
    dx_into(dy, xhat, gamma, rstd, sums, norm, residual, dx, q);
  }
  void layernorm_backward_dx(TensorView<const float> dy, TensorView<const bf16> xhat, TensorView<const float> gamma,
                             TensorView<const float> rstd, TensorView<const float> sums, const Normalization& norm,
                             TensorView<const float> residual, TensorView<float> dx, const Queue& q) const override {
    dx_into(dy, xhat, gamma, rstd, sums, norm, residual, dx, q);
  }

  void embedding_lookup(TensorView<const float> wte, TensorView<const int> tokens, std::int64_t v0,
                        TensorView<float> partial, const Queue& q) const override {
    launch(q, "embedding_lookup", [v0](auto w, auto t, auto p) { cpu::embedding_lookup(w, t, v0, p); }, in(wte),
           in(tokens), out(partial));
  }
  void add_positions(TensorView<const float> wpe, std::int64_t row_offset, std::int64_t seq, TensorView<float> x,
                     const Queue& q) const override {
    launch(q, "add_positions", [=](auto w, auto x_) { cpu::add_positions(w, row_offset, seq, x_); }, in(wpe), out(x));
  }
  void embedding_scatter_add(TensorView<const float> grad, TensorView<const int> tokens, std::int64_t v0,
                             TensorView<float> dwte, const Queue& q) const override {
    launch(q, "embedding_scatter_add", [v0](auto g, auto t, auto d) { cpu::embedding_scatter_add(g, t, v0, d); },
           in(grad), in(tokens), out(dwte));
  }
  void position_grad(TensorView<const float> dx, std::int64_t row_offset, std::int64_t seq, TensorView<float> partial,
                     const Queue& q) const override {
    launch(q, "position_grad", [=](auto d, auto p) { cpu::position_grad(d, row_offset, seq, p); }, in(dx),
           out(partial));
  }
  void cross_entropy_stats(TensorView<const float> logits, TensorView<const int> targets, std::int64_t row_offset,
                           std::int64_t v0, std::int64_t vocab, TensorView<float> stats,
                           const Queue& q) const override {
    launch(q, "cross_entropy_stats",
           [=](auto l, auto t, auto s) { cpu::cross_entropy_stats(l, t, row_offset, v0, vocab, s); }, in(logits),
           in(targets), out(stats));
  }
  void cross_entropy_rescale(TensorView<float> stats, const Queue& q) const override {
    launch(q, "cross_entropy_rescale", [](auto s) { cpu::cross_entropy_rescale(s); }, out(stats));
  }
  void cross_entropy_gradient(TensorView<float> logits, TensorView<const float> stats, TensorView<const int> targets,
                              std::int64_t row_offset, std::int64_t v0, std::int64_t vocab, std::int64_t mean_over,
                              const Queue& q) const override {
    launch(q, "cross_entropy_gradient",
           [=](auto l, auto s, auto t) { cpu::cross_entropy_gradient(l, s, t, row_offset, v0, vocab, mean_over); },
           out(logits), in(stats), in(targets));
  }
  void cross_entropy_gradient(TensorView<const float> logits, TensorView<const float> stats,
                              TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0,
                              std::int64_t vocab, std::int64_t mean_over, TensorView<bf16> dlogits,
                              const Queue& q) const override {
    launch(q, "cross_entropy_gradient",
           [=](auto l, auto s, auto t, auto d) {
             cpu::cross_entropy_gradient(l, s, t, row_offset, v0, vocab, mean_over, d);
           },
           in(logits), in(stats), in(targets), out(dlogits));
  }

  void sum_squares(TensorView<const float> x, TensorView<double> scratch, const Queue& q) const override {
    launch(q, "sum_squares",
           [](auto x_, auto s) { s.data()[sum_squares_scratch() - 1] = cpu::sum_squares(TensorView<const float>(x_)); },
           in(x), out(scratch));
  }
  void adamw_update(TensorView<float> value, TensorView<const float> grad, TensorView<float> m, TensorView<float> v,
                    const AdamWStep& s, TensorView<bf16> value_bf16, const Queue& q) const override {
    if (value_bf16.data() == nullptr) {  // no copy
      launch(q, "adamw_update", [s](auto w, auto g, auto m_, auto v_) { cpu::adamw_update(w, g, m_, v_, s); },
             out(value), in(grad), out(m), out(v));
      return;
    }
    launch(q, "adamw_update",
           [s](auto w, auto g, auto m_, auto v_, auto w16) { cpu::adamw_update_with_copy(w, g, m_, v_, s, w16); },
           out(value), in(grad), out(m), out(v), out(value_bf16));
  }

 private:
  // LayerNorm's backward on xhat in f32 or in bf16 (X).
  template <class X>
  static void partials_into(TensorView<const float> dy, TensorView<const X> xhat, TensorView<const float> gamma,
                            TensorView<float> dgamma, TensorView<float> dbeta, TensorView<float> sums, const Queue& q) {
    launch(q, "layernorm_backward_partials",
           [](auto dy_, auto xh, auto g, auto dg, auto db, auto s) {
             cpu::layernorm_backward_partials(dy_, xh, g, dg, db, s);
           },
           in(dy), in(xhat), in(gamma), out(dgamma), out(dbeta), out(sums));
  }
  template <class X>
  static void dx_into(TensorView<const float> dy, TensorView<const X> xhat, TensorView<const float> gamma,
                      TensorView<const float> rstd, TensorView<const float> sums, const Normalization& norm,
                      TensorView<const float> residual, TensorView<float> dx, const Queue& q) {
    if (residual.rank() == 0) {
      launch(q, "layernorm_backward_dx",
             [norm](auto dy_, auto xh, auto g, auto r, auto s, auto dx_) {
               cpu::layernorm_backward_dx(dy_, xh, g, r, s, norm, TensorView<const float>{}, dx_);
             },
             in(dy), in(xhat), in(gamma), in(rstd), in(sums), out(dx));
      return;
    }
    launch(q, "layernorm_backward_dx",
           [norm](auto dy_, auto xh, auto g, auto r, auto s, auto add, auto dx_) {
             cpu::layernorm_backward_dx(dy_, xh, g, r, s, norm, add, dx_);
           },
           in(dy), in(xhat), in(gamma), in(rstd), in(sums), in(residual), out(dx));
  }
  // The f32 and bf16-out forms of the kernels that write either (Out: float or bf16).
  template <class Out>
  static void attention_forward_into(TensorView<const float> qkv, const AttentionShape& shape, TensorView<Out> out_,
                                     TensorView<float> lse, const Queue& q) {
    launch(q, "flash_attention_forward",
           [shape, math = q.math](auto x, auto o, auto l) { cpu::flash_attention_forward(x, shape, o, l, math); },
           in(qkv), out(out_), out(lse));
  }
  template <class Out>
  static void normalize_into(TensorView<const float> x, TensorView<const float> row_sum,
                             TensorView<const float> sq_dev, TensorView<const float> gamma,
                             TensorView<const float> beta, const Normalization& norm, TensorView<Out> xhat,
                             TensorView<float> rstd, TensorView<Out> y, const Queue& q) {
    launch(q, "layernorm_normalize",
           [norm](auto x_, auto s, auto d, auto g, auto b, auto xh, auto r, auto y_) {
             cpu::layernorm_normalize(x_, s, d, g, b, norm, xh, r, y_);
           },
           in(x), in(row_sum), in(sq_dev), in(gamma), in(beta), out(xhat), out(rstd), out(y));
  }
};

}  // namespace

const AcceleratorKernels& sim_kernels() {
  static const SimKernels kernels;  // stateless
  return kernels;
}

}  // namespace optimus::ops::detail

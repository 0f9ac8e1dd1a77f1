// Row statistics, LayerNorm and the vocabulary-parallel cross-entropy (optimus/core/ops.hpp): checks, then the one
// dispatch (ops_dispatch.hpp) to the CPU kernels (cpu_kernels.hpp) or an accelerator's.
#include "optimus/core/ops.hpp"

#include "cpu_kernels.hpp"
#include "ops_dispatch.hpp"

namespace optimus::ops {
namespace {

using detail::check_shape;
using detail::cols_of;
using detail::contiguous;
using detail::dispatch;
using detail::rows_of;

// LayerNorm's normalization into xhat and y of element type Out (T, or bf16 for an f32 LayerNorm).
template <class T, class Out>
void normalize_into(const char* op, TensorView<const T> x, TensorView<const T> row_sum, TensorView<const T> sq_dev,
                    TensorView<const T> gamma, TensorView<const T> beta, const Normalization& norm, TensorView<Out> xhat,
                    TensorView<T> rstd, TensorView<Out> y, const Queue& queue) {
  const std::int64_t rows = rows_of(x), cols = cols_of(x);
  check_shape(op, "x", x, rows, cols);
  check_shape(op, "row_sum", row_sum, rows, 1);
  check_shape(op, "sq_dev", sq_dev, rows, 1);
  check_shape(op, "gamma", gamma, 1, cols);
  check_shape(op, "beta", beta, 1, cols);
  check_shape(op, "xhat", xhat, rows, cols);
  check_shape(op, "rstd", rstd, rows, 1);
  check_shape(op, "y", y, rows, cols);
  dispatch<T>(op,
              {contiguous("x", x), contiguous("row_sum", row_sum), contiguous("sq_dev", sq_dev),
               contiguous("gamma", gamma), contiguous("beta", beta), contiguous("xhat", xhat),
               contiguous("rstd", rstd), contiguous("y", y)},
              queue, [&] { cpu::layernorm_normalize(x, row_sum, sq_dev, gamma, beta, norm, xhat, rstd, y); },
              [&](const auto& k) {
                k.layernorm_normalize(x, row_sum, sq_dev, gamma, beta, norm, xhat, rstd, y, queue);
              });
}

// xhat in T, or in bf16 as kept (X).
template <class T, class X>
void partials_of(TensorView<const T> dy, TensorView<const X> xhat, TensorView<const T> gamma, TensorView<T> dgamma,
                 TensorView<T> dbeta, TensorView<T> sums, const Queue& queue) {
  const char* op = "layernorm_backward_partials";
  const std::int64_t rows = rows_of(dy), cols = cols_of(dy);
  check_shape(op, "dy", dy, rows, cols);
  check_shape(op, "xhat", xhat, rows, cols);
  check_shape(op, "gamma", gamma, 1, cols);
  check_shape(op, "dgamma", dgamma, 1, cols);
  check_shape(op, "dbeta", dbeta, 1, cols);
  check_shape(op, "sums", sums, 2 * rows, 1);
  dispatch<T>(op,
              {contiguous("dy", dy), contiguous("xhat", xhat), contiguous("gamma", gamma),
               contiguous("dgamma", dgamma), contiguous("dbeta", dbeta), contiguous("sums", sums)},
              queue, [&] { cpu::layernorm_backward_partials(dy, xhat, gamma, dgamma, dbeta, sums); },
              [&](const auto& k) {
                k.layernorm_backward_partials(dy, xhat, gamma, dgamma, dbeta, sums, queue);
              });
}

template <class T, class X>
void dx_of(TensorView<const T> dy, TensorView<const X> xhat, TensorView<const T> gamma, TensorView<const T> rstd,
           TensorView<const T> sums, const Normalization& norm, TensorView<const T> residual, TensorView<T> dx,
           const Queue& queue) {
  const char* op = "layernorm_backward_dx";
  const std::int64_t rows = rows_of(dy), cols = cols_of(dy);
  check_shape(op, "dy", dy, rows, cols);
  check_shape(op, "xhat", xhat, rows, cols);
  check_shape(op, "gamma", gamma, 1, cols);
  check_shape(op, "rstd", rstd, rows, 1);
  check_shape(op, "sums", sums, 2 * rows, 1);
  check_shape(op, "dx", dx, rows, cols);
  const auto cpu = [&] { cpu::layernorm_backward_dx(dy, xhat, gamma, rstd, sums, norm, residual, dx); };
  const auto accelerated = [&](const auto& k) {
    k.layernorm_backward_dx(dy, xhat, gamma, rstd, sums, norm, residual, dx, queue);
  };
  if (residual.rank() == 0) {  // TensorView{}: nothing to add
    dispatch<T>(op,
                {contiguous("dy", dy), contiguous("xhat", xhat), contiguous("gamma", gamma), contiguous("rstd", rstd),
                 contiguous("sums", sums), contiguous("dx", dx)},
                queue, cpu, accelerated);
    return;
  }
  check_shape(op, "residual", residual, rows, cols);
  dispatch<T>(op,
              {contiguous("dy", dy), contiguous("xhat", xhat), contiguous("gamma", gamma), contiguous("rstd", rstd),
               contiguous("sums", sums), contiguous("residual", residual), contiguous("dx", dx)},
              queue, cpu, accelerated);
}

}  // namespace

template <class T>
void row_sums(TensorView<const T> x, TensorView<T> out, const Queue& queue) {
  const char* op = "row_sums";
  check_shape(op, "x", x, rows_of(x), cols_of(x));
  check_shape(op, "out", out, rows_of(x), 1);
  dispatch<T>(op, {contiguous("x", x), contiguous("out", out)}, queue, [&] { cpu::row_sums(x, out); },
              [&](const auto& k) { k.row_sums(x, out, queue); });
}

template <class T>
void layernorm_square_deviations(TensorView<const T> x, TensorView<const T> row_sum, std::int64_t hidden,
                                 TensorView<T> out, const Queue& queue) {
  const char* op = "layernorm_square_deviations";
  const std::int64_t rows = rows_of(x), cols = cols_of(x);
  check_shape(op, "x", x, rows, cols);
  check_shape(op, "row_sum", row_sum, rows, 1);
  check_shape(op, "out", out, rows, 1);
  dispatch<T>(op, {contiguous("x", x), contiguous("row_sum", row_sum), contiguous("out", out)}, queue,
              [&] { cpu::layernorm_square_deviations(x, row_sum, hidden, out); },
              [&](const auto& k) { k.layernorm_square_deviations(x, row_sum, hidden, out, queue); });
}

template <class T>
void layernorm_normalize(TensorView<const T> x, TensorView<const T> row_sum, TensorView<const T> sq_dev,
                         TensorView<const T> gamma, TensorView<const T> beta, const Normalization& norm, TensorView<T> xhat,
                         TensorView<T> rstd, TensorView<T> y, const Queue& queue) {
  normalize_into("layernorm_normalize", x, row_sum, sq_dev, gamma, beta, norm, xhat, rstd, y, queue);
}

void layernorm_normalize(TensorView<const float> x, TensorView<const float> row_sum, TensorView<const float> sq_dev,
                         TensorView<const float> gamma, TensorView<const float> beta, const Normalization& norm,
                         TensorView<bf16> xhat, TensorView<float> rstd, TensorView<bf16> y, const Queue& queue) {
  normalize_into("layernorm_normalize (bf16 out)", x, row_sum, sq_dev, gamma, beta, norm, xhat, rstd, y, queue);
}

template <class T>
void layernorm_backward_partials(TensorView<const T> dy, TensorView<const T> xhat, TensorView<const T> gamma,
                                 TensorView<T> dgamma, TensorView<T> dbeta, TensorView<T> sums, const Queue& queue) {
  partials_of(dy, xhat, gamma, dgamma, dbeta, sums, queue);
}

void layernorm_backward_partials(TensorView<const float> dy, TensorView<const bf16> xhat,
                                 TensorView<const float> gamma, TensorView<float> dgamma, TensorView<float> dbeta,
                                 TensorView<float> sums, const Queue& queue) {
  partials_of(dy, xhat, gamma, dgamma, dbeta, sums, queue);
}

template <class T>
void layernorm_backward_dx(TensorView<const T> dy, TensorView<const T> xhat, TensorView<const T> gamma,
                           TensorView<const T> rstd, TensorView<const T> sums, const Normalization& norm,
                           TensorView<const T> residual, TensorView<T> dx, const Queue& queue) {
  dx_of(dy, xhat, gamma, rstd, sums, norm, residual, dx, queue);
}

void layernorm_backward_dx(TensorView<const float> dy, TensorView<const bf16> xhat, TensorView<const float> gamma,
                           TensorView<const float> rstd, TensorView<const float> sums, const Normalization& norm,
                           TensorView<const float> residual, TensorView<float> dx, const Queue& queue) {
  dx_of(dy, xhat, gamma, rstd, sums, norm, residual, dx, queue);
}

// A block's rows of the targets, and a vocabulary that the slice [v0, v0 + vn) starts within (or past: a slice of
// padding only).
void check_slice(const char* op, std::int64_t rows, std::int64_t row_offset, std::int64_t n_targets, std::int64_t v0,
                 std::int64_t vocab) {
  OPTIMUS_CHECK(row_offset >= 0 && row_offset + rows <= n_targets, op, ": rows ", row_offset, "..", row_offset + rows,
                " are outside the ", n_targets, " targets");
  OPTIMUS_CHECK(v0 >= 0 && vocab > 0, op, ": a slice from id ", v0, " of a vocabulary of ", vocab, " ids");
}

template <class T>
void cross_entropy_stats(TensorView<const T> logits, TensorView<const int> targets, std::int64_t row_offset,
                         std::int64_t v0, std::int64_t vocab, TensorView<T> stats, const Queue& queue) {
  const char* op = "cross_entropy_stats";
  const std::int64_t rows = rows_of(logits), vn = cols_of(logits);
  check_shape(op, "logits", logits, rows, vn);
  check_shape(op, "stats", stats, 4, rows);
  check_slice(op, rows, row_offset, targets.numel(), v0, vocab);
  dispatch<T>(op, {contiguous("logits", logits), contiguous("targets", targets), contiguous("stats", stats)}, queue,
              [&] { cpu::cross_entropy_stats(logits, targets, row_offset, v0, vocab, stats); },
              [&](const auto& k) { k.cross_entropy_stats(logits, targets, row_offset, v0, vocab, stats, queue); });
}

template <class T>
void cross_entropy_rescale(TensorView<T> stats, const Queue& queue) {
  const char* op = "cross_entropy_rescale";
  OPTIMUS_CHECK(stats.rank() == 2 && stats.size(0) == 4, op, ": expected stats [4, rows], got shape ", stats.shape());
  dispatch<T>(op, {contiguous("stats", stats)}, queue, [&] { cpu::cross_entropy_rescale(stats); },
              [&](const auto& k) { k.cross_entropy_rescale(stats, queue); });
}

namespace {
// cross_entropy_gradient's checks (both forms).
template <class T>
void check_gradient(const char* op, TensorView<const T> logits, TensorView<const T> stats,
                    TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0, std::int64_t vocab,
                    std::int64_t mean_over) {
  const std::int64_t rows = rows_of(logits), vn = cols_of(logits), n_tokens = targets.numel();
  check_shape(op, "logits", logits, rows, vn);
  check_shape(op, "stats", stats, 4, rows);
  check_slice(op, rows, row_offset, n_tokens, v0, vocab);
  OPTIMUS_CHECK(mean_over >= n_tokens, op, ": a mean over ", mean_over, " tokens cannot include all ", n_tokens,
                " targets");
}
}  // namespace

void cross_entropy_gradient(TensorView<const float> logits, TensorView<const float> stats,
                            TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0,
                            std::int64_t vocab, std::int64_t mean_over, TensorView<bf16> dlogits, const Queue& queue) {
  const char* op = "cross_entropy_gradient (into bf16)";
  check_gradient(op, logits, stats, targets, row_offset, v0, vocab, mean_over);
  OPTIMUS_CHECK(dlogits.shape() == logits.shape(), op, ": dlogits has shape ", dlogits.shape(), ", logits ",
                logits.shape());
  dispatch<float>(op,
                  {contiguous("logits", logits), contiguous("stats", stats), contiguous("targets", targets),
                   contiguous("dlogits", dlogits)},
                  queue,
                  [&] { cpu::cross_entropy_gradient(logits, stats, targets, row_offset, v0, vocab, mean_over, dlogits); },
                  [&](const auto& k) {
                    k.cross_entropy_gradient(logits, stats, targets, row_offset, v0, vocab, mean_over, dlogits, queue);
                  });
}

template <class T>
void cross_entropy_gradient(TensorView<T> logits, TensorView<const T> stats, TensorView<const int> targets,
                            std::int64_t row_offset, std::int64_t v0, std::int64_t vocab, std::int64_t mean_over,
                            const Queue& queue) {
  const char* op = "cross_entropy_gradient";
  check_gradient<T>(op, logits, stats, targets, row_offset, v0, vocab, mean_over);
  dispatch<T>(op, {contiguous("logits", logits), contiguous("stats", stats), contiguous("targets", targets)}, queue,
              [&] { cpu::cross_entropy_gradient(logits, stats, targets, row_offset, v0, vocab, mean_over); },
              [&](const auto& k) {
                k.cross_entropy_gradient(logits, stats, targets, row_offset, v0, vocab, mean_over, queue);
              });
}

#define OPTIMUS_INSTANTIATE(T)                                                                                        \
  template void row_sums<T>(TensorView<const T>, TensorView<T>, const Queue&);                                        \
  template void layernorm_square_deviations<T>(TensorView<const T>, TensorView<const T>, std::int64_t, TensorView<T>, \
                                               const Queue&);                                                         \
  template void layernorm_normalize<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,                 \
                                       TensorView<const T>, TensorView<const T>, const Normalization&, TensorView<T>, \
                                       TensorView<T>, TensorView<T>, const Queue&);                                   \
  template void layernorm_backward_partials<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,         \
                                               TensorView<T>, TensorView<T>, TensorView<T>, const Queue&);            \
  template void layernorm_backward_dx<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,               \
                                         TensorView<const T>, TensorView<const T>, const Normalization&,              \
                                         TensorView<const T>,                                                         \
                                         TensorView<T>,                                                               \
                                         const Queue&);                                                               \
  template void cross_entropy_stats<T>(TensorView<const T>, TensorView<const int>, std::int64_t, std::int64_t,        \
                                       std::int64_t, TensorView<T>, const Queue&);                                    \
  template void cross_entropy_rescale<T>(TensorView<T>, const Queue&);                                                \
  template void cross_entropy_gradient<T>(TensorView<T>, TensorView<const T>, TensorView<const int>, std::int64_t,    \
                                          std::int64_t, std::int64_t, std::int64_t, const Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

// Row statistics, LayerNorm and the vocabulary-parallel cross-entropy (optimus/core/ops.hpp), each described once: its
// checks, its CPU body (cpu_kernels.hpp; the simulated device runs it on its stream) and its CUDA launch
// (norm_kernels.cu, embedding_loss_kernels.cu), through dispatch.hpp's run.
#include "optimus/core/ops.hpp"

#include "optimus/core/cpu_kernels.hpp"
#include "dispatch.hpp"

namespace optimus::ops {
namespace {

using detail::check_shape;
using detail::cols_of;
using detail::in;
using detail::out;
using detail::rows_of;
using detail::run;

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
  run<T>(
      op, queue,
      [norm](auto x_, auto sum, auto sq, auto g, auto b, auto xhat_, auto rstd_, auto y_) {
        cpu::layernorm_normalize(x_, sum, sq, g, b, norm, xhat_, rstd_, y_);
      },
      [norm](auto x_, auto sum, auto sq, auto g, auto b, auto xhat_, auto rstd_, auto y_, cudaStream_t s) {
        const auto eps = static_cast<float>(norm.eps);
        if constexpr (std::is_same_v<Out, bf16>) {
          OPTIMUS_CUDA_LAUNCH(cuda::layernorm_normalize_bf16(x_.data(), sum.data(), sq.data(), g.data(), b.data(),
                                                             norm.hidden, eps, rows_of(x_), cols_of(x_), xhat_.data(),
                                                             rstd_.data(), y_.data(), s));
        } else {
          OPTIMUS_CUDA_LAUNCH(cuda::layernorm_normalize(x_.data(), sum.data(), sq.data(), g.data(), b.data(),
                                                        norm.hidden, eps, rows_of(x_), cols_of(x_), xhat_.data(),
                                                        rstd_.data(), y_.data(), s));
        }
      },
      in("x", x), in("row_sum", row_sum), in("sq_dev", sq_dev), in("gamma", gamma), in("beta", beta),
      out("xhat", xhat), out("rstd", rstd), out("y", y));
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
  run<T>(
      op, queue,
      [](auto dy_, auto xhat_, auto g, auto dg, auto db, auto sums_) {
        cpu::layernorm_backward_partials(dy_, xhat_, g, dg, db, sums_);
      },
      [](auto dy_, auto xhat_, auto g, auto dg, auto db, auto sums_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::layernorm_backward_partials(dy_.data(), xhat_.data(), g.data(), rows_of(dy_),
                                                              cols_of(dy_), dg.data(), db.data(), sums_.data(), s));
      },
      in("dy", dy), in("xhat", xhat), in("gamma", gamma), out("dgamma", dgamma), out("dbeta", dbeta),
      out("sums", sums));
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
  if (residual.rank() != 0) check_shape(op, "residual", residual, rows, cols);  // TensorView{}: nothing to add
  run<T>(
      op, queue,
      [norm](auto dy_, auto xhat_, auto g, auto rstd_, auto sums_, auto residual_, auto dx_) {
        cpu::layernorm_backward_dx(dy_, xhat_, g, rstd_, sums_, norm, residual_, dx_);
      },
      [norm](auto dy_, auto xhat_, auto g, auto rstd_, auto sums_, auto residual_, auto dx_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::layernorm_backward_dx(
            dy_.data(), xhat_.data(), g.data(), rstd_.data(), sums_.data(), norm.hidden, norm.centered,
            residual_.rank() == 0 ? nullptr : residual_.data(), rows_of(dy_), cols_of(dy_), dx_.data(), s));
      },
      in("dy", dy), in("xhat", xhat), in("gamma", gamma), in("rstd", rstd), in("sums", sums),
      in("residual", residual), out("dx", dx));
}

}  // namespace

template <class T>
void row_sums(TensorView<const T> x, TensorView<T> out, const Queue& queue) {
  const char* op = "row_sums";
  check_shape(op, "x", x, rows_of(x), cols_of(x));
  check_shape(op, "out", out, rows_of(x), 1);
  run<T>(
      op, queue, [](auto x_, auto out_) { cpu::row_sums(x_, out_); },
      [](auto x_, auto out_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::row_sums(x_.data(), rows_of(x_), cols_of(x_), out_.data(), s));
      },
      in("x", x), detail::out("out", out));
}

template <class T>
void layernorm_square_deviations(TensorView<const T> x, TensorView<const T> row_sum, std::int64_t hidden,
                                 TensorView<T> out, const Queue& queue) {
  const char* op = "layernorm_square_deviations";
  const std::int64_t rows = rows_of(x), cols = cols_of(x);
  check_shape(op, "x", x, rows, cols);
  check_shape(op, "row_sum", row_sum, rows, 1);
  check_shape(op, "out", out, rows, 1);
  run<T>(
      op, queue, [hidden](auto x_, auto sum, auto out_) { cpu::layernorm_square_deviations(x_, sum, hidden, out_); },
      [hidden](auto x_, auto sum, auto out_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::layernorm_square_deviations(x_.data(), sum.data(), hidden, rows_of(x_), cols_of(x_),
                                                              out_.data(), s));
      },
      in("x", x), in("row_sum", row_sum), detail::out("out", out));
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
  run<T>(
      op, queue,
      [=](auto logits_, auto targets_, auto stats_) {
        cpu::cross_entropy_stats(logits_, targets_, row_offset, v0, vocab, stats_);
      },
      [=](auto logits_, auto targets_, auto stats_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::cross_entropy_stats(logits_.data(), targets_.data(), row_offset, v0, vocab,
                                                      rows_of(logits_), cols_of(logits_), stats_.data(), s));
      },
      in("logits", logits), in("targets", targets), out("stats", stats));
}

template <class T>
void cross_entropy_rescale(TensorView<T> stats, const Queue& queue) {
  const char* op = "cross_entropy_rescale";
  OPTIMUS_CHECK(stats.rank() == 2 && stats.size(0) == 4, op, ": expected stats [4, rows], got shape ", stats.shape());
  run<T>(
      op, queue, [](auto stats_) { cpu::cross_entropy_rescale(stats_); },
      [](auto stats_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::cross_entropy_rescale(stats_.data(), stats_.numel() / 4, s));
      },
      out("stats", stats));
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
  // (Whether it counts every predicted target is the caller's check: the targets may be on a device.)
  OPTIMUS_CHECK(mean_over >= 1, op, ": a mean over ", mean_over, " tokens (of ", n_tokens, " targets)");
}
}  // namespace

void cross_entropy_gradient(TensorView<const float> logits, TensorView<const float> stats,
                            TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0,
                            std::int64_t vocab, std::int64_t mean_over, TensorView<bf16> dlogits, const Queue& queue) {
  const char* op = "cross_entropy_gradient (into bf16)";
  check_gradient(op, logits, stats, targets, row_offset, v0, vocab, mean_over);
  OPTIMUS_CHECK(dlogits.shape() == logits.shape(), op, ": dlogits has shape ", dlogits.shape(), ", logits ",
                logits.shape());
  run<float>(
      op, queue,
      [=](auto logits_, auto stats_, auto targets_, auto dlogits_) {
        cpu::cross_entropy_gradient(logits_, stats_, targets_, row_offset, v0, vocab, mean_over, dlogits_);
      },
      [=](auto logits_, auto stats_, auto targets_, auto dlogits_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::cross_entropy_gradient(logits_.data(), stats_.data(), targets_.data(), row_offset,
                                                         v0, vocab, rows_of(logits_), cols_of(logits_), mean_over,
                                                         dlogits_.data(), s));
      },
      in("logits", logits), in("stats", stats), in("targets", targets), out("dlogits", dlogits));
}

template <class T>
void cross_entropy_gradient(TensorView<T> logits, TensorView<const T> stats, TensorView<const int> targets,
                            std::int64_t row_offset, std::int64_t v0, std::int64_t vocab, std::int64_t mean_over,
                            const Queue& queue) {
  const char* op = "cross_entropy_gradient";
  check_gradient<T>(op, logits, stats, targets, row_offset, v0, vocab, mean_over);
  run<T>(
      op, queue,
      [=](auto logits_, auto stats_, auto targets_) {
        cpu::cross_entropy_gradient(logits_, stats_, targets_, row_offset, v0, vocab, mean_over);
      },
      [=](auto logits_, auto stats_, auto targets_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::cross_entropy_gradient(logits_.data(), stats_.data(), targets_.data(), row_offset,
                                                         v0, vocab, rows_of(logits_), cols_of(logits_), mean_over,
                                                         logits_.data(), s));
      },
      out("logits", logits), in("stats", stats), in("targets", targets));
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

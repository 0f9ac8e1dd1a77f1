// The arithmetic of the layers' kernels per element and per row, written once for every backend: the CPU kernels —
// which the simulated device runs too — and the CUDA kernels call these functions, so that only indexing,
// reductions and launch configuration differ between host and GPU code, and a fix here (a dropped NaN, say) is a fix
// everywhere. C++17, no std:: types (nvcc device code); __host__ __device__ under nvcc. T is float or double.
#pragma once

#include <math.h>    // tanh, expf, ...: host and (under nvcc) device overloads
#include <string.h>  // memcpy (host code)

#include <cstdint>

#include "optimus/core/adamw_step.hpp"
#include "optimus/core/host_device.hpp"
#include "optimus/core/philox.hpp"

namespace optimus::math {

OPTIMUS_HOST_DEVICE inline double tanh_of(double v) { return tanh(v); }
OPTIMUS_HOST_DEVICE inline float sqrt_of(float v) { return sqrtf(v); }
OPTIMUS_HOST_DEVICE inline double sqrt_of(double v) { return sqrt(v); }

// 2^k as a float for an integer -126 <= k <= 127: the exponent field set, the mantissa zero; k = -127: 0.
OPTIMUS_HOST_DEVICE inline float power_of_two(std::int32_t k) {
  const std::int32_t bits = (k + 127) << 23;
#ifdef __CUDA_ARCH__
  return __int_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// e^y in f32 for k, the integer nearest y / ln 2 (the caller rounds: it knows y's sign), with -127 <= k <= 127:
//   e^y = 2^k e^r,  r = y - k ln 2 in [-ln2/2, ln2/2] (ln 2 in two parts, Cody and Waite),
//   e^r by its Taylor polynomial to r^7 (truncation below 6e-9 relatively);
// k = -127 gives 0 (2^k's bits are then zero). No branch and no library call, so that the CPU's loops vectorise and
// the GPU runs the same arithmetic.
OPTIMUS_HOST_DEVICE inline float exp_from(float y, std::int32_t k) {
  const float kf = static_cast<float>(k);
  const float r = (y - kf * 0.693145752f) - kf * 1.42860677e-6f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * power_of_two(k);
}

// tanh in f32 (glibc's tanhf, one call per element, was the largest non-GEMM cost of a block step):
//   tanh |v| = 1 - 2 / (e^y + 1),  y = 2 min(|v|, 10)      (tanh 10 is 1 in f32, as the formula gives there),
// e^y by exp_from, and the sign of v put back. Its absolute error is at most 1.2e-7 (glibc's tanhf: 1.0e-7; measured on
// a 1e-5 grid of [-12, 12] against tanh in f64); near 0 the relative error grows, which GELU, the only user, does not
// see (it adds tanh to 1): GELU's and its derivative's errors are those of glibc's tanhf's (1.2e-7 of max(|GELU|, 1),
// 5.6e-7).
OPTIMUS_HOST_DEVICE inline float tanh_of(float v) {
  const float a = fabsf(v);
  const float y = 2.0f * (a < 10.0f ? a : 10.0f);  // a select once the loop is vectorised (-fno-trapping-math)
  const std::int32_t k = static_cast<std::int32_t>(y * 1.44269504f + 0.5f);  // y >= 0: truncation rounds
  const float t = 1.0f - 2.0f / (exp_from(y, k) + 1.0f);
  return copysignf(t, v);
}

// e^v for v <= 0 — a softmax's term, its score minus its row's largest — in f32 by exp_from (expf, one library call
// per element, was a softmax's largest cost on the CPU). Below about -87.3 the result is 0 (expf's is below 2^-126
// there: nothing beside the row's largest term, which is 1); a NaN stays a NaN. Relative error at most 1.1e-7
// against exp in f64 (measured on a 1e-5 grid of [-87, 0]; expf's: 6.0e-8). A v a little above 0 is a rounding of 0
// (a score recomputed in the backward minus its row's lse): it gets e^v as well, k rounded to nearest on either side,
// so e^1e-6 is 1 + 1e-6, not 1e-6. Above 88 (+inf from a row of non-finite scores) +inf: y stays in [-88, 88], so
// that k's conversion never sees an out-of-range value. k comes from truncf: converted directly, GCC leaves the loop
// unvectorised for AVX2. In f64, exp itself.
OPTIMUS_HOST_DEVICE inline float exp_nonpositive(float v) {
  const float y = v > -88.0f ? (v < 88.0f ? v : 88.0f) : -88.0f;  // a NaN becomes -88 here and is put back below
  const float half = y < 0.0f ? -0.5f : 0.5f;
  const std::int32_t k = static_cast<std::int32_t>(truncf(y * 1.44269504f + half));  // rounds; in [-127, 127]
  const float e = exp_from(y, k);
  return v <= 88.0f ? e : (v == v ? HUGE_VALF : v);
}
OPTIMUS_HOST_DEVICE inline double exp_nonpositive(double v) { return exp(v); }

// ---- element-wise -----------------------------------------------------------------------------------------
// alpha x + beta y, where beta = 0 ignores y (a NaN in y does not propagate: y is being overwritten).
template <class T>
OPTIMUS_HOST_DEVICE inline T axpby(T alpha, T x, T beta, T y) {
  return beta == T(0) ? alpha * x : alpha * x + beta * y;
}

// GELU, tanh form: 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), and its derivative.
template <class T>
OPTIMUS_HOST_DEVICE inline T gelu(T v) {
  const T c = T(0.7978845608028654), a = T(0.044715);
  return T(0.5) * v * (T(1) + tanh_of(c * (v + a * v * v * v)));
}
template <class T>
OPTIMUS_HOST_DEVICE inline T gelu_derivative(T v) {
  const T c = T(0.7978845608028654), a = T(0.044715);
  const T t = tanh_of(c * (v + a * v * v * v));
  return T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * c * (T(1) + T(3) * a * v * v);
}

// SiLU (swish), SwiGLU's gate: silu(v) = v sigmoid(v), and its derivative sigmoid(v) (1 + v (1 - sigmoid(v))).
// sigmoid(v) = 1 / (1 + e^-v) (expf in f32, exp in f64; e^-v = inf gives 0, so silu(-inf) is -0, not NaN).
OPTIMUS_HOST_DEVICE inline float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }
OPTIMUS_HOST_DEVICE inline double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }
template <class T>
OPTIMUS_HOST_DEVICE inline T silu(T v) {
  return v * sigmoid(v);
}
template <class T>
OPTIMUS_HOST_DEVICE inline T silu_derivative(T v) {
  const T s = sigmoid(v);
  return s * (T(1) + v * (T(1) - s));
}

// Dropout of global element (row, col): kept with probability 1 - p, then scaled by `scale` = 1 / (1 - p); a dropped
// element becomes 0 whatever it was (an inf or NaN too: it is not multiplied by 0).
//
// The draw: one Philox call, at counter (col / 4, row, stream), serves the four columns 4j .. 4j + 3 of a row, column
// col taking 32-bit word col mod 4 (a call yields four); the element is kept iff its word >= ceil(p 2^32) (p 2^32 is
// exact), i.e. with probability 1 - p to within 2^-32. Kernels compute the threshold once and, over contiguous
// columns, one call per four elements (dropout_words).
constexpr int kDropoutColumnsPerDraw = 4;
OPTIMUS_HOST_DEVICE inline std::uint64_t dropout_threshold(double p) {
  return static_cast<std::uint64_t>(ceil(p * 4294967296.0));  // p in [0, 1): at most 2^32
}
// The four words of columns 4 group .. 4 group + 3 of `row`.
OPTIMUS_HOST_DEVICE inline void dropout_words(std::uint64_t seed, std::uint64_t stream, std::uint64_t row,
                                              std::uint64_t group, std::uint32_t words[4]) {
  philox::element_bits(seed, stream, row, group, words);
}
OPTIMUS_HOST_DEVICE inline bool dropout_keeps(double p, std::uint64_t seed, std::uint64_t stream, std::uint64_t row,
                                              std::uint64_t col) {
  std::uint32_t words[4];
  dropout_words(seed, stream, row, col / kDropoutColumnsPerDraw, words);
  return words[col % kDropoutColumnsPerDraw] >= dropout_threshold(p);
}
template <class T>
OPTIMUS_HOST_DEVICE inline T dropout(T x, bool keep, T scale) {
  return keep ? x * scale : T(0);
}

// The in-process reductions: sum, max or min (max and min as std::max and std::min: acc < x ? x : acc), so that a
// reduction on any device gives the host's bits.
enum class Combine { sum, max, min };
template <class T>
OPTIMUS_HOST_DEVICE inline T combine(T acc, T x, Combine op) {
  return op == Combine::sum ? acc + x : op == Combine::max ? (acc < x ? x : acc) : (x < acc ? x : acc);
}

// ---- LayerNorm over `hidden` features (a row's sums reduced over the grid row) --------------------------------
template <class T>
OPTIMUS_HOST_DEVICE inline T layernorm_mean(T row_sum, T hidden) {
  return row_sum / hidden;
}
template <class T>
OPTIMUS_HOST_DEVICE inline T layernorm_rstd(T square_deviations, T hidden, T eps) {
  return T(1) / sqrt_of(square_deviations / hidden + eps);
}
template <class T>
OPTIMUS_HOST_DEVICE inline T layernorm_xhat(T x, T mean, T rstd) {
  return (x - mean) * rstd;
}
template <class T>
OPTIMUS_HOST_DEVICE inline T layernorm_y(T xhat, T gamma, T beta) {
  return xhat * gamma + beta;
}
// dx from dy, with mean_d = sum(dy gamma) / hidden and mean_dx = sum(dy gamma xhat) / hidden over the row.
template <class T>
OPTIMUS_HOST_DEVICE inline T layernorm_dx(T dy, T gamma, T xhat, T rstd, T mean_d, T mean_dx) {
  return rstd * (dy * gamma - mean_d - xhat * mean_dx);
}

// ---- causal softmax of scaled scores, and its backward ------------------------------------------------------
// The unnormalized probability exp(scale s - max), max the row's largest scaled score; then e / sum.
template <class T>
OPTIMUS_HOST_DEVICE inline T softmax_exp(T score, T scale, T max) {
  return exp_nonpositive(scale * score - max);
}
template <class T>
OPTIMUS_HOST_DEVICE inline T normalized(T e, T sum) {
  return e / sum;
}
// ds = scale p (dp - dot), dot = sum over the row of dp p.
template <class T>
OPTIMUS_HOST_DEVICE inline T softmax_grad(T p, T dp, T dot, T scale) {
  return scale * p * (dp - dot);
}

// ---- vocabulary-parallel cross-entropy -------------------------------------------------------------------
// The target of a position that is not predicted (a masked LM's unmasked positions): no loss, a gradient of zeros.
constexpr int kIgnoredTarget = -1;
// A row's loss from its reduced sum of exp(logit - max), its max and its target logit.
template <class T>
OPTIMUS_HOST_DEVICE inline double cross_entropy_loss(T exp_sum, T max, T target_logit) {
  return log(static_cast<double>(exp_sum)) + static_cast<double>(max) - static_cast<double>(target_logit);
}
// dlogits = (softmax - onehot(target)) / n_tokens.
template <class T>
OPTIMUS_HOST_DEVICE inline T cross_entropy_grad(T p, bool is_target, T n_tokens) {
  return (is_target ? p - T(1) : p) / n_tokens;
}

// ---- the optimizer ----------------------------------------------------------------------------------------
// One AdamW element (optimus/core/adamw_step.hpp), in double, on master weight w and moments m, v.
template <class T>
OPTIMUS_HOST_DEVICE inline void adamw(T& w, T grad, T& m, T& v, const AdamWStep& s) {
  const double g = s.clip * static_cast<double>(grad);
  m = static_cast<T>(s.beta1 * m + (1 - s.beta1) * g);
  v = static_cast<T>(s.beta2 * v + (1 - s.beta2) * g * g);
  const double update = (m / s.c1) / (sqrt(v / s.c2) + s.eps);
  w = static_cast<T>(w - s.lr * (update + s.weight_decay * w));
}

}  // namespace optimus::math

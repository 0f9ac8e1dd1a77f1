// CPU backend: fused attention, causal or bidirectional (cpu_kernels.hpp, optimus/core/ops.hpp), FlashAttention-2's algorithm, so that
// no [seq, seq] matrix is whole in memory on the host either. The products are the CPU GEMM's (cpu::gemm: OpenBLAS
// where built with it) on views of qkv, whose rows are strided.
//
// Forward, per head of a sequence and per tile of kQueries queries: the key tiles (kKeys keys) the queries may see,
// each a product Q Kᵀ, the running max and sum per query (math::exp_nonpositive against the new max, the output
// rescaled when the max grows), the tile's dropped probabilities times V added to the output; then out = acc / sum
// and lse = max + log(sum). Backward, per tile of queries: its strip of probabilities over the keys it sees, rebuilt as
// exp(scale q.k - lse), and the strip's dP = dO Vᵀ through the dropout mask; D = rowsum(P dP); dS = scale P (dP - D);
// dQ = dS K, dK += dSᵀ Q, dV += (dropped P)ᵀ dO. Workspace: O(kQueries x seq) numbers.
//
// Mixed precision (GemmMath::bf16, f32): the products' operands are rounded to bf16 as a GPU's tensor cores take them
// (flash_attention_mma.cu) — Q, K, V and dO once (copies: O(batches x seq x width) more), each tile's dropped
// probabilities and dS before their products — and the forward's key tiles are the GPU kernel's 64 keys, so that the
// online softmax rescales after the same keys and rounds the same terms: the two devices then differ by the order of
// their sums, as bf16 GEMMs do.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "optimus/core/cpu_kernels.hpp"
#include "vector_clones.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus::cpu {
namespace {

constexpr std::int64_t kQueries = 64;  // queries of a tile
constexpr std::int64_t kKeys = 256;    // keys of a forward tile (a multiple of the dropout draws' 4 columns)
constexpr std::int64_t kMixedKeys = 64;  // the same under mixed precision: the GPU kernel's

// Whether the products take bf16 operands: mixed precision, in f32 (f64 ignores the GEMM math).
template <class T>
bool bf16_operands(ops::GemmMath math) {
  return std::is_same_v<T, float> && math == ops::GemmMath::bf16;
}

// x[0.. n) rounded to bf16's precision, kept in f32: bf16(x) widened (to nearest even; a NaN stays a quiet NaN).
OPTIMUS_VECTOR_CLONES void round_floats_to_bf16(float* x, std::int64_t n) {
  for (std::int64_t e = 0; e < n; ++e) x[e] = static_cast<float>(bf16(x[e]));
}

// The same in T (f64: nothing; mixed precision is f32's).
template <class T>
void round_to_bf16(T* x, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>) round_floats_to_bf16(x, n);
}

// x itself, or (mixed: bf16 operands) a copy of it rounded to bf16 in `storage`. x: contiguous.
template <class T>
TensorView<const T> operands(TensorView<const T> x, bool mixed, std::vector<T>& storage) {
  if (!mixed) return x;
  storage.assign(x.data(), x.data() + x.numel());
  round_to_bf16(storage.data(), x.numel());
  return TensorView<const T>(storage.data(), x.shape(), Device::cpu);
}

// Sequence b's keys before its padding: L_b, or seq where the sequences are not padded.
std::int64_t sequence_length(const ops::AttentionShape& s, std::int64_t b) {
  return s.lengths.data() == nullptr ? s.seq : s.lengths.data()[b];
}

// Head t of sequence b: its Q, K, V [seq, d] (and its gradient's) as views of qkv's layout, its tiles' first row of
// the global dropout mask, its first row of lse, and its keys before the padding.
template <class T>
struct Head {
  TensorView<T> q, k, v;
  std::uint64_t mask_row;
  std::int64_t lse_row;
  std::int64_t length;

  Head(TensorView<T> qkv, const ops::AttentionShape& s, std::int64_t d, std::int64_t b, std::int64_t t)
      : q(qkv.block(b * s.seq, t * d, s.seq, d)),
        k(qkv.block(b * s.seq, s.heads * d + t * d, s.seq, d)),
        v(qkv.block(b * s.seq, 2 * s.heads * d + t * d, s.seq, d)),
        mask_row(static_cast<std::uint64_t>(((s.first_batch + b) * s.total_heads + s.first_head + t) * s.seq)),
        lse_row((b * s.heads + t) * s.seq),
        length(sequence_length(s, b)) {}
};

template <class T>
TensorView<T> rows_of(TensorView<T> x, std::int64_t first, std::int64_t count) {
  return x.block(first, 0, count, x.size(1));
}

// A contiguous [rows, cols] view of `buffer`.
template <class T>
TensorView<T> matrix(std::vector<T>& buffer, std::int64_t rows, std::int64_t cols) {
  return TensorView<T>(buffer.data(), Shape{rows, cols}, Device::cpu);
}

// One past the last key query i of a sequence of `length` keys before its padding sees: i + 1 (causal), or seq
// (bidirectional), at most length. Non-decreasing in i.
std::int64_t keys_seen(const ops::AttentionShape& s, std::int64_t length, std::int64_t i) {
  return std::min(s.causal ? i + 1 : s.seq, length);
}

// The keys query i sees among the `cols` from j0, within [0, cols].
std::int64_t visible(const ops::AttentionShape& s, std::int64_t length, std::int64_t i, std::int64_t j0,
                     std::int64_t cols) {
  return std::clamp<std::int64_t>(keys_seen(s, length, i) - j0, 0, cols);
}

// p[c] = exp(p[c] - max) for c < n, 0 from n to cols (the keys the query does not see: later or padding).
template <class T>
void exps_in_place(T* p, T max, std::int64_t n, std::int64_t cols) {
  exps(p, max, n, p);
  std::fill(p + n, p + cols, T(0));
}

// The row's first n values dropped as the global mask's row `row` from column col0 says: x / (1 - p) or 0.
template <class T>
void drop(T* x, std::int64_t n, std::uint64_t row, std::uint64_t col0, const ops::AttentionShape& s) {
  if (s.dropout <= 0.0 || n == 0) return;
  dropout(TensorView<T>(x, Shape{1, n}, Device::cpu), row, col0, s.dropout, s.seed, s.stream);
}

template <class T, class Out>
void forward_head(const Head<const T>& h, const ops::AttentionShape& s, std::int64_t d, bool mixed, TensorView<Out> out,
                  T* lse) {
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  const std::int64_t key_tile = mixed ? kMixedKeys : kKeys;
  std::vector<T> scores(static_cast<std::size_t>(kQueries * kKeys)), acc(static_cast<std::size_t>(kQueries * d));
  std::vector<T> max(kQueries), sum(kQueries);
  for (std::int64_t i0 = 0; i0 < s.seq; i0 += kQueries) {
    const std::int64_t rows = std::min(kQueries, s.seq - i0);
    std::fill(max.begin(), max.end(), -std::numeric_limits<T>::infinity());
    std::fill(sum.begin(), sum.end(), T(0));
    std::fill(acc.begin(), acc.end(), T(0));
    const TensorView<T> a = matrix(acc, rows, d);
    const std::int64_t seen = keys_seen(s, h.length, i0 + rows - 1);  // by the tile's last query: it sees the most
    for (std::int64_t j0 = 0; j0 < seen; j0 += key_tile) {  // the key tiles some query of this tile sees
      const std::int64_t cols = std::min({key_tile, s.seq - j0, seen - j0});
      const TensorView<T> tile = matrix(scores, rows, cols);
      gemm<T>(Trans::no, Trans::yes, scale, rows_of(h.q, i0, rows), rows_of(h.k, j0, cols), T(0), tile);
      for (std::int64_t r = 0; r < rows; ++r) {
        T* p = scores.data() + r * cols;
        const std::int64_t n = visible(s, h.length, i0 + r, j0, cols);
        if (n == 0) {
          std::fill(p, p + cols, T(0));
          continue;
        }
        T& m = max[static_cast<std::size_t>(r)];
        const T new_max = std::max(m, *std::max_element(p, p + n));
        const T rescale = math::exp_nonpositive(m - new_max);
        exps_in_place(p, new_max, n, cols);
        sum[static_cast<std::size_t>(r)] = rescale * sum[static_cast<std::size_t>(r)] + lane_sum(p, n);
        drop(p, n, h.mask_row + static_cast<std::uint64_t>(i0 + r), static_cast<std::uint64_t>(j0), s);
        if (mixed) round_to_bf16(p, n);
        for (std::int64_t c = 0; c < d; ++c) acc[static_cast<std::size_t>(r * d + c)] *= rescale;
        m = new_max;
      }
      gemm<T>(Trans::no, Trans::no, T(1), std::as_const(tile), rows_of(h.v, j0, cols), T(1), a);
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      const T l = sum[static_cast<std::size_t>(r)];
      for (std::int64_t c = 0; c < d; ++c) out(i0 + r, c) = Out(acc[static_cast<std::size_t>(r * d + c)] / l);
      lse[i0 + r] = max[static_cast<std::size_t>(r)] + std::log(l);
    }
  }
}

template <class T>
void backward_head(const Head<const T>& h, const Head<T>& dh, const ops::AttentionShape& s, std::int64_t d, bool mixed,
                   TensorView<const T> dout, const T* lse, const T* delta) {
  const T scale = T(1) / std::sqrt(static_cast<T>(d));
  fill<T>(dh.k, T(0));
  fill<T>(dh.v, T(0));
  std::vector<T> p(static_cast<std::size_t>(kQueries * s.seq)), dp(p.size());
  for (std::int64_t i0 = 0; i0 < s.seq; i0 += kQueries) {
    const std::int64_t rows = std::min(kQueries, s.seq - i0);
    const std::int64_t keys = keys_seen(s, h.length, i0 + rows - 1);  // the keys the tile's queries see
    const TensorView<T> P = matrix(p, rows, keys), DP = matrix(dp, rows, keys);
    gemm<T>(Trans::no, Trans::yes, scale, rows_of(h.q, i0, rows), rows_of(h.k, 0, keys), T(0), P);
    gemm<T>(Trans::no, Trans::yes, T(1), rows_of(dout, i0, rows), rows_of(h.v, 0, keys), T(0), DP);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t n = keys_seen(s, h.length, i0 + r);
      T* pr = p.data() + r * keys;
      T* dpr = dp.data() + r * keys;
      exps_in_place(pr, lse[i0 + r], n, keys);  // the forward's probabilities: exp(scale q.k - lse)
      drop(dpr, n, h.mask_row + static_cast<std::uint64_t>(i0 + r), 0, s);
      const T dot = delta[i0 + r];  // sum over the keys of P dP, from the output (attention_delta)
      // dS in dp's place; then the dropped probabilities in p's, for dV.
      for (std::int64_t c = 0; c < keys; ++c) dpr[c] = math::softmax_grad(pr[c], dpr[c], dot, scale);
      drop(pr, n, h.mask_row + static_cast<std::uint64_t>(i0 + r), 0, s);
      if (mixed) {
        round_to_bf16(dpr, n);
        round_to_bf16(pr, n);
      }
    }
    gemm<T>(Trans::no, Trans::no, T(1), std::as_const(DP), rows_of(h.k, 0, keys), T(0), rows_of(dh.q, i0, rows));
    gemm<T>(Trans::yes, Trans::no, T(1), std::as_const(DP), rows_of(h.q, i0, rows), T(1), rows_of(dh.k, 0, keys));
    gemm<T>(Trans::yes, Trans::no, T(1), std::as_const(P), rows_of(dout, i0, rows), T(1), rows_of(dh.v, 0, keys));
  }
}

// Every head of every sequence; out in T, or in bf16 as it is written.
template <class T, class Out>
void forward_heads(TensorView<const T> qkv, const ops::AttentionShape& s, TensorView<Out> out, TensorView<T> lse,
                   ops::GemmMath math) {
  const std::int64_t width = out.size(1), d = width / s.heads, batches = out.size(0) / s.seq;
  const bool mixed = bf16_operands<T>(math);
  std::vector<T> rounded;
  const TensorView<const T> x = operands(qkv, mixed, rounded);
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t t = 0; t < s.heads; ++t) {
      const Head<const T> h(x, s, d, b, t);
      forward_head(h, s, d, mixed, out.block(b * s.seq, t * d, s.seq, d), lse.data() + h.lse_row);
    }
  }
}

}  // namespace

template <class T>
void flash_attention_forward(TensorView<const T> qkv, const ops::AttentionShape& s, TensorView<T> out,
                             TensorView<T> lse, ops::GemmMath math) {
  forward_heads(qkv, s, out, lse, math);
}

void flash_attention_forward(TensorView<const float> qkv, const ops::AttentionShape& s, TensorView<bf16> out,
                             TensorView<float> lse, ops::GemmMath math) {
  forward_heads(qkv, s, out, lse, math);
}

namespace {

// D per query row and head: dout . out over the head's columns, in T, column by column (out in T or bf16).
template <class T, class O>
void delta_heads(TensorView<const O> out, TensorView<const T> dout, const ops::AttentionShape& s,
                 TensorView<T> delta) {
  const std::int64_t width = dout.size(1), d = width / s.heads, batches = dout.size(0) / s.seq;
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t t = 0; t < s.heads; ++t) {
      for (std::int64_t i = 0; i < s.seq; ++i) {
        const O* o = out.data() + (b * s.seq + i) * width + t * d;
        const T* g = dout.data() + (b * s.seq + i) * width + t * d;
        T dot = T(0);
        for (std::int64_t c = 0; c < d; ++c) dot += g[c] * static_cast<T>(o[c]);
        delta.data()[(b * s.heads + t) * s.seq + i] = dot;
      }
    }
  }
}

}  // namespace

template <class T>
void attention_delta(TensorView<const T> out, TensorView<const T> dout, const ops::AttentionShape& s,
                     TensorView<T> delta) {
  delta_heads(out, dout, s, delta);
}

void attention_delta(TensorView<const bf16> out, TensorView<const float> dout, const ops::AttentionShape& s,
                     TensorView<float> delta) {
  delta_heads(out, dout, s, delta);
}

template <class T>
void flash_attention_backward(TensorView<const T> qkv, TensorView<const T> dout, TensorView<const T> lse,
                              TensorView<const T> delta, const ops::AttentionShape& s, TensorView<T> dqkv,
                              ops::GemmMath math) {
  const std::int64_t width = dout.size(1), d = width / s.heads, batches = dout.size(0) / s.seq;
  const bool mixed = bf16_operands<T>(math);
  std::vector<T> rounded_qkv, rounded_dout;
  const TensorView<const T> x = operands(qkv, mixed, rounded_qkv), dy = operands(dout, mixed, rounded_dout);
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t t = 0; t < s.heads; ++t) {
      const Head<const T> h(x, s, d, b, t);
      backward_head(h, Head<T>(dqkv, s, d, b, t), s, d, mixed, dy.block(b * s.seq, t * d, s.seq, d),
                    lse.data() + h.lse_row, delta.data() + h.lse_row);
    }
  }
}

// qkv widened to f32 (contiguous, as ops checked).
std::vector<float> widened(TensorView<const bf16> qkv) {
  std::vector<float> x(static_cast<std::size_t>(qkv.numel()));
  to_f32(qkv, TensorView<float>(x.data(), qkv.shape(), Device::cpu));
  return x;
}

void flash_attention_forward(TensorView<const bf16> qkv, const ops::AttentionShape& s, TensorView<bf16> out,
                             TensorView<float> lse) {
  const std::vector<float> x = widened(qkv);
  forward_heads(TensorView<const float>(x.data(), qkv.shape(), Device::cpu), s, out, lse, ops::GemmMath::bf16);
}

void flash_attention_backward(TensorView<const bf16> qkv, TensorView<const float> dout, TensorView<const float> lse,
                              TensorView<const float> delta, const ops::AttentionShape& s, TensorView<float> dqkv) {
  const std::vector<float> x = widened(qkv);
  flash_attention_backward<float>(TensorView<const float>(x.data(), qkv.shape(), Device::cpu), dout, lse, delta, s,
                                  dqkv, ops::GemmMath::bf16);
}

#define OPTIMUS_INSTANTIATE(T)                                                                                   \
  template void flash_attention_forward<T>(TensorView<const T>, const ops::AttentionShape&, TensorView<T>,    \
                                           TensorView<T>, ops::GemmMath);                                        \
  template void attention_delta<T>(TensorView<const T>, TensorView<const T>, const ops::AttentionShape&,     \
                                   TensorView<T>);                                                              \
  template void flash_attention_backward<T>(TensorView<const T>, TensorView<const T>, TensorView<const T>,     \
                                            TensorView<const T>, const ops::AttentionShape&, TensorView<T>,     \
                                            ops::GemmMath);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::cpu

// SwiGLU and grouped-query attention's key/value heads on the CPU (ops::swiglu_*, ops::repeat_kv, ops::sum_kv).
#include "optimus/core/cpu_kernels.hpp"
#include "optimus/core/element_math.hpp"

namespace optimus::cpu {
namespace {

float widened(bf16 v) { return static_cast<float>(v); }
template <class T>
T widened(T v) { return v; }

// y [m, f] = silu(gate) * up of gu [m, 2 f] (G: T or bf16, read widened), each element also handed to `keep`.
template <class G, class T, class Write>
void swiglu_rows(const G* gu, std::int64_t rows, std::int64_t f, Write&& write) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const G* gate = gu + r * 2 * f;
    const G* up = gate + f;
    for (std::int64_t c = 0; c < f; ++c) {
      const T g = widened(gate[c]), u = widened(up[c]);
      write(r * f + c, math::silu(g) * u);
    }
  }
}

template <class G, class T>
void swiglu_backward_rows(const G* gu, const T* dy, T* dgu, std::int64_t rows, std::int64_t f) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const G* gate = gu + r * 2 * f;
    const G* up = gate + f;
    T* dgate = dgu + r * 2 * f;
    T* dup = dgate + f;
    for (std::int64_t c = 0; c < f; ++c) {
      const T g = widened(gate[c]), u = widened(up[c]), d = dy[r * f + c];
      dgate[c] = d * u * math::silu_derivative(g);
      dup[c] = d * math::silu(g);
    }
  }
}

// Query head t of `heads` reads key/value head t / (heads / kv_heads): full's column of (part, head t, i) from qkv's.
template <class T>
void repeat_rows(const T* qkv, T* full, std::int64_t rows, std::int64_t d, const ops::KvHeads& kv) {
  const std::int64_t width = (kv.heads + 2 * kv.kv_heads) * d, full_width = 3 * kv.heads * d;
  const std::int64_t group = kv.heads / kv.kv_heads;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* in = qkv + r * width;
    T* out = full + r * full_width;
    for (std::int64_t c = 0; c < kv.heads * d; ++c) out[c] = in[c];  // Q
    for (std::int64_t part = 0; part < 2; ++part) {                   // K, then V
      const T* from = in + kv.heads * d + part * kv.kv_heads * d;
      T* to = out + (1 + part) * kv.heads * d;
      for (std::int64_t t = 0; t < kv.heads; ++t) {
        for (std::int64_t i = 0; i < d; ++i) to[t * d + i] = from[(t / group) * d + i];
      }
    }
  }
}

}  // namespace

template <class T>
void swiglu_forward(TensorView<const T> gu, TensorView<T> y) {
  T* out = y.data();
  swiglu_rows<T, T>(gu.data(), y.size(0), y.size(1), [out](std::int64_t e, T v) { out[e] = v; });
}

void swiglu_forward(TensorView<const float> gu, TensorView<bf16> y, TensorView<bf16> gu_kept) {
  bf16* out = y.data();
  swiglu_rows<float, float>(gu.data(), y.size(0), y.size(1), [out](std::int64_t e, float v) { out[e] = bf16(v); });
  for (std::int64_t e = 0; e < gu.numel(); ++e) gu_kept.data()[e] = bf16(gu.data()[e]);
}

template <class T>
void swiglu_backward(TensorView<const T> gu, TensorView<const T> dy, TensorView<T> dgu) {
  swiglu_backward_rows<T, T>(gu.data(), dy.data(), dgu.data(), dy.size(0), dy.size(1));
}

void swiglu_backward(TensorView<const bf16> gu, TensorView<const float> dy, TensorView<float> dgu) {
  swiglu_backward_rows<bf16, float>(gu.data(), dy.data(), dgu.data(), dy.size(0), dy.size(1));
}

template <class T>
void repeat_kv(TensorView<const T> qkv, TensorView<T> full, const ops::KvHeads& kv) {
  repeat_rows(qkv.data(), full.data(), qkv.size(0), full.size(1) / (3 * kv.heads), kv);
}

template <class T>
void sum_kv(TensorView<const T> dfull, TensorView<T> dqkv, const ops::KvHeads& kv) {
  const std::int64_t rows = dfull.size(0), d = dfull.size(1) / (3 * kv.heads);
  const std::int64_t width = dqkv.size(1), full_width = dfull.size(1), group = kv.heads / kv.kv_heads;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* in = dfull.data() + r * full_width;
    T* out = dqkv.data() + r * width;
    for (std::int64_t c = 0; c < kv.heads * d; ++c) out[c] = in[c];  // dQ
    for (std::int64_t part = 0; part < 2; ++part) {                   // dK, then dV
      const T* from = in + (1 + part) * kv.heads * d;
      T* to = out + kv.heads * d + part * kv.kv_heads * d;
      for (std::int64_t h = 0; h < kv.kv_heads; ++h) {
        for (std::int64_t i = 0; i < d; ++i) {
          T sum = from[(h * group) * d + i];
          for (std::int64_t t = 1; t < group; ++t) sum += from[(h * group + t) * d + i];
          to[h * d + i] = sum;
        }
      }
    }
  }
}

template void swiglu_forward<float>(TensorView<const float>, TensorView<float>);
template void swiglu_forward<double>(TensorView<const double>, TensorView<double>);
template void swiglu_backward<float>(TensorView<const float>, TensorView<const float>, TensorView<float>);
template void swiglu_backward<double>(TensorView<const double>, TensorView<const double>, TensorView<double>);
template void repeat_kv<float>(TensorView<const float>, TensorView<float>, const ops::KvHeads&);
template void repeat_kv<double>(TensorView<const double>, TensorView<double>, const ops::KvHeads&);
template void repeat_kv<bf16>(TensorView<const bf16>, TensorView<bf16>, const ops::KvHeads&);
template void sum_kv<float>(TensorView<const float>, TensorView<float>, const ops::KvHeads&);
template void sum_kv<double>(TensorView<const double>, TensorView<double>, const ops::KvHeads&);

}  // namespace optimus::cpu

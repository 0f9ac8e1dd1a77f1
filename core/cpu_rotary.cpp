// RoPE on the CPU (ops::rotary): each row's query and key heads turned pair by pair, cos and sin taken in f64.
#include <cmath>
#include <vector>

#include "optimus/core/cpu_kernels.hpp"

namespace optimus::cpu {

template <class T>
void rotary(TensorView<T> qkv, const ops::Rotary& r) {
  const std::int64_t rows = qkv.size(0), cols = qkv.size(1), d = cols / (r.heads + 2 * r.kv_heads), half = d / 2;
  const std::int64_t turned = (r.heads + r.kv_heads) * d;  // the query heads' and key heads' columns
  const T flip = r.inverse ? T(-1) : T(1);  // the inverse turns by -angle
  std::vector<double> frequency(static_cast<std::size_t>(half));  // theta^(-2i/d), the same for every row
  for (std::int64_t i = 0; i < half; ++i) {
    frequency[static_cast<std::size_t>(i)] = std::pow(r.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  }
  std::vector<T> cos_of(static_cast<std::size_t>(half)), sin_of(static_cast<std::size_t>(half));
  for (std::int64_t row = 0; row < rows; ++row) {
    const auto pos = static_cast<double>(row % r.seq);
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = pos * frequency[static_cast<std::size_t>(i)];
      cos_of[static_cast<std::size_t>(i)] = static_cast<T>(std::cos(angle));
      sin_of[static_cast<std::size_t>(i)] = flip * static_cast<T>(std::sin(angle));
    }
    T* const line = qkv.data() + row * cols;
    for (std::int64_t column = 0; column < turned; column += d) {  // the query heads, then the key heads
      T* const head = line + column;
      for (std::int64_t i = 0; i < half; ++i) {
        const T a = head[i], b = head[i + half], c = cos_of[static_cast<std::size_t>(i)],
                s = sin_of[static_cast<std::size_t>(i)];
        head[i] = a * c - b * s;
        head[i + half] = b * c + a * s;
      }
    }
  }
}

template void rotary<float>(TensorView<float>, const ops::Rotary&);
template void rotary<double>(TensorView<double>, const ops::Rotary&);

}  // namespace optimus::cpu

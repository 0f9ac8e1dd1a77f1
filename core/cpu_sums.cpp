// CPU backend: the lane sum (cpu_kernels.hpp).
#include "optimus/core/cpu_kernels.hpp"
#include "vector_clones.hpp"

namespace optimus::cpu {

template <class T>
OPTIMUS_VECTOR_CLONES T lane_sum(const T* x, std::int64_t n) {
  T lanes[kSumLanes] = {};
  std::int64_t e = 0;
  for (; e + kSumLanes <= n; e += kSumLanes) {
    for (std::int64_t l = 0; l < kSumLanes; ++l) lanes[l] += x[e + l];
  }
  for (std::int64_t l = 0; e + l < n; ++l) lanes[l] += x[e + l];
  for (std::int64_t half = kSumLanes / 2; half >= 1; half /= 2) {
    for (std::int64_t l = 0; l < half; ++l) lanes[l] += lanes[l + half];
  }
  return lanes[0];
}

template <class T>
OPTIMUS_VECTOR_CLONES void exps(const T* x, T max, std::int64_t n, T* out) {
  for (std::int64_t c = 0; c < n; ++c) out[c] = math::softmax_exp(x[c], T(1), max);
}

template float lane_sum<float>(const float*, std::int64_t);
template double lane_sum<double>(const double*, std::int64_t);
template void exps<float>(const float*, float, std::int64_t, float*);
template void exps<double>(const double*, double, std::int64_t, double*);

}  // namespace optimus::cpu

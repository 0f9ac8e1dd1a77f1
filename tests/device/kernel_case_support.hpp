// What the kernel cases (kernel_cases.cpp, attention_kernel_cases.cpp) share: operands on the host and on the device
// with the same values, and the comparison of a device's result with the host's.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "device_world.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/rng.hpp"
#include "optimus/device/rank_device.hpp"

namespace optimus::test::kernel_cases {

inline std::vector<float> random_values(std::int64_t n, std::uint64_t seed, double scale = 1.0) {
  const CounterRng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (std::size_t e = 0; e < x.size(); ++e) x[e] = static_cast<float>(scale * (2 * rng.uniform(0, e) - 1));
  return x;
}

// x rounded to bf16, and bf16 values widened back: the values mixed precision keeps, in each form.
inline std::vector<bf16> to_bits(const std::vector<float>& x) {
  std::vector<bf16> bits(x.size());
  for (std::size_t e = 0; e < x.size(); ++e) bits[e] = bf16(x[e]);
  return bits;
}
inline std::vector<float> widened(const std::vector<bf16>& bits) {
  std::vector<float> x(bits.size());
  for (std::size_t e = 0; e < bits.size(); ++e) x[e] = static_cast<float>(bits[e]);
  return x;
}

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

template <class T>
double as_double(T x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return static_cast<double>(static_cast<float>(x));
  } else {
    return static_cast<double>(x);
  }
}

// One operand on the host and on the device, with the same values.
template <class T>
struct Both {
  Both(std::vector<T> values, Shape s, RankDevice& rank)
      : host(std::move(values)), shape(s), device(to_device(host, s, rank.memory())) {}
  std::vector<T> host;
  Shape shape;
  Tensor<T> device;

  TensorView<T> on_host() { return TensorView<T>(host.data(), shape, Device::cpu); }
  TensorView<const T> in_host() const { return TensorView<const T>(host.data(), shape, Device::cpu); }
  TensorView<T> on_device() { return device.view(); }
  TensorView<const T> in_device() const { return device.view(); }
};

// Compares the device's result with the host's: bit for bit where `exact` (the simulated device runs the CPU kernels;
// dropout masks, casts and rank-order reductions are defined to the bit on every device), within 1e-5 relative
// otherwise (a GPU sums in another order), or `tolerance` where a GPU rounds operands the CPU keeps (near).
struct Expect {
  bool exact;
  template <class T>
  void same(const char* what, const Both<T>& b, bool always_exact = false) const {
    near(what, b, 1e-5, always_exact);
  }
  template <class T>
  void near(const char* what, const Both<T>& b, double tolerance, bool always_exact = false) const {
    const std::vector<T> got = download(b.device);
    REQUIRE(got.size() == b.host.size());
    const std::string operand = what;  // CAPTURE of a const char* prints the pointer
    CAPTURE(operand);
    if (exact || always_exact) {  // bit for bit (a NaN matches any NaN: a GPU writes its own payload)
      bool same = true;
      for (std::size_t e = 0; e < got.size(); ++e) {
        same = same && (std::memcmp(&got[e], &b.host[e], sizeof(T)) == 0 || (is_nan(got[e]) && is_nan(b.host[e])));
      }
      CHECK(same);
      return;
    }
    double worst = 0;
    for (std::size_t e = 0; e < got.size(); ++e) {
      const double x = as_double(got[e]), y = as_double(b.host[e]);
      worst = std::max(worst, std::abs(x - y) / (1 + std::abs(y)));
    }
    CAPTURE(worst);
    CHECK(worst <= tolerance);
  }
};

// The fused attention's cases: FlashAttention-2's forward and backward in f32 and under mixed precision (bf16 products,
// qkv kept in bf16), against the host's.
void attention_kernels(RankDevice& rank, const ops::Queue& q, const Expect& expect);
// Llama's parts: SwiGLU forward and backward (f32 and into/from bf16), grouped-query attention's widened key/value
// heads and their summed gradients, RoPE on grouped qkv (llama_kernel_cases.cpp).
void llama_parts(RankDevice& rank, const ops::Queue& q, const Expect& expect);
// GELU's exact form (ops/gelu_erf.cpp: described once, its CPU body run by the simulated device): f32 on both devices
// (bit for bit on the simulated device); the host's f32 and f64 against x Phi(x) and its derivative in double, the
// derivative also against a central difference of the f64 forward; mismatched shapes refused by name
// (gelu_erf_cases.cpp).
void gelu_erf(RankDevice& rank, const ops::Queue& q, const Expect& expect);

}  // namespace optimus::test::kernel_cases

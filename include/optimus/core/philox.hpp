// Philox4x32-10 (Salmon et al., SC'11) as plain inline functions that compile for the host and, under nvcc,
// for the device: the CPU's CounterRng and the CUDA dropout kernels draw from this one implementation, so a
// dropout mask is the same bits on either. No std:: types: nvcc device code cannot call them.
#pragma once

#include <cstdint>

#include "optimus/core/host_device.hpp"

namespace optimus::philox {

// Ten rounds on counter c[4] with key k[2] (k is advanced in place, c becomes the output).
OPTIMUS_HOST_DEVICE inline void rounds10(std::uint32_t c[4], std::uint32_t k[2]) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    const std::uint32_t n0 = hi1 ^ c[1] ^ k[0], n2 = hi0 ^ c[3] ^ k[1];
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
}

// The 128 bits of element (row, col) of stream `stream` under `seed`: the key is the seed, the counter
// (col, row, stream). Rows and columns must be below 2^32 (CounterRng checks).
OPTIMUS_HOST_DEVICE inline void element_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t row,
                                             std::uint64_t col, std::uint32_t out[4]) {
  std::uint32_t k[2] = {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  out[0] = static_cast<std::uint32_t>(col);
  out[1] = static_cast<std::uint32_t>(row);
  out[2] = static_cast<std::uint32_t>(stream);
  out[3] = static_cast<std::uint32_t>(stream >> 32);
  rounds10(out, k);
}

// 53 bits from two words, as a double in [0, 1) (exact: the same value on host and device).
OPTIMUS_HOST_DEVICE inline double to_unit(std::uint32_t w0, std::uint32_t w1) {
  const std::uint64_t x = ((static_cast<std::uint64_t>(w0) << 32) | w1) >> 11;
  return static_cast<double>(x) * (1.0 / 9007199254740992.0);  // 2^-53
}

// Uniform in [0, 1) for element (row, col): CounterRng(seed, stream).uniform(row, col).
OPTIMUS_HOST_DEVICE inline double uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t row,
                                          std::uint64_t col) {
  std::uint32_t w[4];
  element_bits(seed, stream, row, col, w);
  return to_unit(w[0], w[1]);
}

}  // namespace optimus::philox

// bfloat16 conversions on the bits, shared by optimus::bf16 on the host and the CUDA cast kernels: a float's top 16
// bits, rounded to nearest even; a NaN stays a (quiet) NaN. C++17, __host__ __device__ under nvcc.
#pragma once

#include <cstdint>

#include "optimus/core/host_device.hpp"

namespace optimus::math {

OPTIMUS_HOST_DEVICE inline std::uint16_t bf16_from_float_bits(std::uint32_t u) {
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // keep NaN a (quiet) NaN
  }
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

OPTIMUS_HOST_DEVICE inline std::uint32_t float_bits_from_bf16(std::uint16_t bits) {
  return static_cast<std::uint32_t>(bits) << 16;
}

}  // namespace optimus::math

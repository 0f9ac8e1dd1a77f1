// Element types: f32 and f64 for compute, bf16 as a storage type (conversion only, no arithmetic), and u8: bytes that
// are moved but never reduced (an ncclUniqueId, a text).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "optimus/core/bf16_bits.hpp"

namespace optimus {

enum class DType { f32, f64, bf16, u8 };

// bfloat16 storage: the top 16 bits of an IEEE float. Converting from float rounds to nearest even.
struct bf16 {
  std::uint16_t bits = 0;

  constexpr bf16() = default;
  explicit bf16(float value) : bits(math::bf16_from_float_bits(std::bit_cast<std::uint32_t>(value))) {}
  explicit operator float() const { return std::bit_cast<float>(math::float_bits_from_bf16(bits)); }

  friend constexpr bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
};
static_assert(sizeof(bf16) == 2);

template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::bf16; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::u8; };

template <class T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::u8: return 1;
  }
  return 0;
}

constexpr std::string_view name_of(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::u8: return "u8";
  }
  return "?";
}

// Parses "f32", "f64" or "bf16" (the element types of matrices); throws optimus::Error naming the text otherwise.
DType parse_dtype(std::string_view text);

}  // namespace optimus

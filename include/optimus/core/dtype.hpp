// Element types: f32 and f64 for compute, bf16 as a storage type (conversion only, no arithmetic).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace optimus {

enum class DType { f32, f64, bf16 };

// bfloat16 storage: the top 16 bits of an IEEE float. Converting from float rounds to nearest even.
struct bf16 {
  std::uint16_t bits = 0;

  constexpr bf16() = default;
  explicit bf16(float value) : bits(from_float(value)) {}
  explicit operator float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

  friend constexpr bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }

 private:
  static std::uint16_t from_float(float value) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // keep NaN a (quiet) NaN
    }
    const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>((u + rounding) >> 16);
  }
};
static_assert(sizeof(bf16) == 2);

template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::bf16; };

template <class T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
  }
  return 0;
}

constexpr std::string_view name_of(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
  }
  return "?";
}

// Parses "f32", "f64" or "bf16"; throws optimus::Error naming the text otherwise.
DType parse_dtype(std::string_view text);

}  // namespace optimus

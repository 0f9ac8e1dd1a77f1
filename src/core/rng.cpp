// Philox4x32-10 and the per-element draws built on it.
#include "optimus/core/rng.hpp"

#include <cmath>
#include <numbers>

#include "optimus/core/error.hpp"

namespace optimus {
namespace {

constexpr std::uint32_t kMul0 = 0xD2511F53u;
constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;

inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(product >> 32);
  lo = static_cast<std::uint32_t>(product);
}

inline std::uint32_t lo32(std::uint64_t x) { return static_cast<std::uint32_t>(x); }
inline std::uint32_t hi32(std::uint64_t x) { return static_cast<std::uint32_t>(x >> 32); }

// 53 bits from two words, as a double in [0, 1).
inline double to_unit(std::uint32_t w0, std::uint32_t w1) {
  const std::uint64_t x = ((static_cast<std::uint64_t>(w0) << 32) | w1) >> 11;
  return static_cast<double>(x) * 0x1.0p-53;
}

}  // namespace

Philox4x32Counter philox4x32_10(Philox4x32Counter c, Philox4x32Key k) {
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c[0], hi0, lo0);
    mulhilo(kMul1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

Philox4x32Counter CounterRng::bits(std::uint64_t row, std::uint64_t col) const {
  // The key is the seed; the counter is (col, row, stream). Rows and columns below 2^32 keep every
  // element's counter distinct.
  OPTIMUS_CHECK(row <= 0xffffffffull && col <= 0xffffffffull, "CounterRng: element (", row, ", ", col,
                ") is beyond the 2^32 x 2^32 index space");
  return philox4x32_10({lo32(col), lo32(row), lo32(stream_), hi32(stream_)}, {lo32(seed_), hi32(seed_)});
}

double CounterRng::uniform(std::uint64_t row, std::uint64_t col) const {
  const Philox4x32Counter w = bits(row, col);
  return to_unit(w[0], w[1]);
}

double CounterRng::normal(std::uint64_t row, std::uint64_t col) const {
  const Philox4x32Counter w = bits(row, col);
  const double u = 1.0 - to_unit(w[0], w[1]);  // (0, 1]: log(u) is finite
  const double v = to_unit(w[2], w[3]);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

}  // namespace optimus

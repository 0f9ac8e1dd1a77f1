// Philox4x32-10 and the per-element draws built on it.
#include "optimus/core/rng.hpp"

#include <cmath>
#include <numbers>

#include "optimus/core/error.hpp"
#include "optimus/core/philox.hpp"

namespace optimus {

Philox4x32Counter philox4x32_10(Philox4x32Counter c, Philox4x32Key k) {
  philox::rounds10(c.data(), k.data());
  return c;
}

Philox4x32Counter CounterRng::bits(std::uint64_t row, std::uint64_t col) const {
  // Rows and columns below 2^32 keep every element's counter distinct.
  OPTIMUS_CHECK(row <= 0xffffffffull && col <= 0xffffffffull, "CounterRng: element (", row, ", ", col,
                ") is beyond the 2^32 x 2^32 index space");
  Philox4x32Counter w;
  philox::element_bits(seed_, stream_, row, col, w.data());
  return w;
}

double CounterRng::uniform(std::uint64_t row, std::uint64_t col) const {
  const Philox4x32Counter w = bits(row, col);
  return philox::to_unit(w[0], w[1]);
}

double CounterRng::normal(std::uint64_t row, std::uint64_t col) const {
  const Philox4x32Counter w = bits(row, col);
  const double u = 1.0 - philox::to_unit(w[0], w[1]);  // (0, 1]: log(u) is finite
  const double v = philox::to_unit(w[2], w[3]);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

}  // namespace optimus

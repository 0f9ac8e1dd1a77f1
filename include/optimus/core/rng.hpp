// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11) for partition-independent
// initialization: the value at (row, col) is a pure function of (seed, stream, row, col), so a
// matrix filled block by block on any q x q grid equals the one filled whole on one rank.
#pragma once

#include <array>
#include <cstdint>

namespace optimus {

using Philox4x32Counter = std::array<std::uint32_t, 4>;
using Philox4x32Key = std::array<std::uint32_t, 2>;

// Ten rounds of Philox4x32 on one counter block.
Philox4x32Counter philox4x32_10(Philox4x32Counter counter, Philox4x32Key key);

class CounterRng {
 public:
  // `stream` separates independent uses of one seed (a dropout step and layer, say).
  explicit CounterRng(std::uint64_t seed, std::uint64_t stream = 0) : seed_(seed), stream_(stream) {}

  // 128 random bits for element (row, col).
  Philox4x32Counter bits(std::uint64_t row, std::uint64_t col) const;
  // Uniform in [0, 1) with 53 random bits.
  double uniform(std::uint64_t row, std::uint64_t col) const;
  // Standard normal (Box-Muller on the element's 128 bits).
  double normal(std::uint64_t row, std::uint64_t col) const;

  std::uint64_t seed() const { return seed_; }
  std::uint64_t stream() const { return stream_; }

 private:
  std::uint64_t seed_;
  std::uint64_t stream_;
};

// A distribution to draw element values from: uniform on [a, b) or normal with mean a and stddev b.
struct Distribution {
  enum class Kind { uniform, normal };
  Kind kind = Kind::uniform;
  double a = -1.0;
  double b = 1.0;

  static Distribution uniform(double lo, double hi) { return {Kind::uniform, lo, hi}; }
  static Distribution normal(double mean, double stddev) { return {Kind::normal, mean, stddev}; }

  double sample(const CounterRng& rng, std::uint64_t row, std::uint64_t col) const {
    return kind == Kind::uniform ? a + (b - a) * rng.uniform(row, col) : a + b * rng.normal(row, col);
  }
};

}  // namespace optimus

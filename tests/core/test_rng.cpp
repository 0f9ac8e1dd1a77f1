// Philox4x32-10 known answers and the properties partition independence relies on.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"

using optimus::CounterRng;
using optimus::Philox4x32Counter;

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors") {
  CHECK(optimus::philox4x32_10({0, 0, 0, 0}, {0, 0}) == Philox4x32Counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(optimus::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        Philox4x32Counter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(optimus::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        Philox4x32Counter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("element values depend on (seed, stream, row, col) alone") {
  const CounterRng a(42), b(42), other_seed(43), other_stream(42, 1);
  std::set<double> seen;
  for (std::uint64_t r = 0; r < 16; ++r) {
    for (std::uint64_t c = 0; c < 16; ++c) {
      CHECK(a.uniform(r, c) == b.uniform(r, c));
      CHECK(a.uniform(r, c) != other_seed.uniform(r, c));
      CHECK(a.uniform(r, c) != other_stream.uniform(r, c));
      seen.insert(a.uniform(r, c));
    }
  }
  CHECK(seen.size() == 256);  // (r, c) and (c, r) are different elements
  CHECK_THROWS_AS(a.uniform(1ull << 32, 0), optimus::Error);
}

TEST_CASE("uniform and normal draws have the right moments") {
  const CounterRng rng(7);
  const int n = 20000;
  double su = 0, suu = 0, sn = 0, snn = 0;
  for (int e = 0; e < n; ++e) {
    const double u = rng.uniform(static_cast<std::uint64_t>(e), 3);
    CHECK((u >= 0.0 && u < 1.0));
    su += u;
    suu += u * u;
    const double z = rng.normal(static_cast<std::uint64_t>(e), 5);
    sn += z;
    snn += z * z;
  }
  // Standard errors: 0.002 for the uniform mean, 0.007 for the normal mean; bounds are ~5 of them.
  CHECK(std::abs(su / n - 0.5) < 0.01);
  CHECK(std::abs(suu / n - su * su / n / n - 1.0 / 12) < 0.005);
  CHECK(std::abs(sn / n) < 0.035);
  CHECK(std::abs(snn / n - 1.0) < 0.05);
}

// dtypes: sizes, names, parsing and bf16 rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "optimus/core/dtype.hpp"
#include "optimus/core/error.hpp"

using optimus::bf16;
using optimus::DType;

TEST_CASE("dtype sizes, names and parsing") {
  CHECK(optimus::size_of(DType::f32) == 4);
  CHECK(optimus::size_of(DType::f64) == 8);
  CHECK(optimus::size_of(DType::bf16) == 2);
  CHECK(optimus::dtype_of<double> == DType::f64);
  for (DType t : {DType::f32, DType::f64, DType::bf16}) CHECK(optimus::parse_dtype(optimus::name_of(t)) == t);
  CHECK_THROWS_WITH_AS(optimus::parse_dtype("f16"), doctest::Contains("'f16'"), optimus::Error);
}

TEST_CASE("bf16 keeps 8 significant bits and rounds to nearest even") {
  CHECK(static_cast<float>(bf16(1.0f)) == 1.0f);
  CHECK(static_cast<float>(bf16(-3.5f)) == -3.5f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  CHECK(static_cast<float>(bf16(1.0f + 0x1.0p-8f)) == 1.0f);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties go to 1 + 2^-6.
  CHECK(static_cast<float>(bf16(1.0f + 3 * 0x1.0p-8f)) == 1.0f + 0x1.0p-6f);
  CHECK(static_cast<float>(bf16(1.0f + 0x1.8p-8f)) == 1.0f + 0x1.0p-7f);  // above halfway rounds up
  CHECK(std::isnan(static_cast<float>(bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isinf(static_cast<float>(bf16(std::numeric_limits<float>::infinity()))));
  const float x = 3.14159265f;
  CHECK(std::abs(static_cast<float>(bf16(x)) - x) <= x * 0x1.0p-8f);
}

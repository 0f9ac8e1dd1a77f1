// The comparison every test relies on must itself catch wrong numbers and NaNs.
#include <doctest/doctest.h>

#include <cmath>

#include "optimus/reference/matmul.hpp"

using optimus::reference::Matrix;

TEST_CASE("compare counts elements outside atol + rtol*|ref| and never passes NaN") {
  Matrix ref(2, 2);
  ref << 1.0, -2.0, 100.0, 0.0;
  Matrix x = ref;
  CHECK(optimus::reference::compare(x, ref, 0.0, 0.0).ok());
  x(1, 0) = 100.01;
  auto c = optimus::reference::compare(x, ref, 0.0, 1e-5);
  CHECK(c.wrong == 1);
  CHECK(c.max_abs_error == doctest::Approx(0.01));
  CHECK(c.rel_error == doctest::Approx(1e-4));
  CHECK(optimus::reference::compare(x, ref, 0.0, 1e-3).ok());
  x(1, 0) = NAN;
  CHECK(optimus::reference::compare(x, ref, 1e9, 1e9).wrong == 1);
  CHECK_FALSE(optimus::reference::compare(Matrix(2, 3), ref, 1, 1).ok());
}

TEST_CASE("reference products agree with each other's transposes") {
  const Matrix a = optimus::reference::random_matrix(4, 3, 1);
  const Matrix b = optimus::reference::random_matrix(3, 5, 2);
  const Matrix ab = optimus::reference::matmul(a, b);
  CHECK(optimus::reference::compare(optimus::reference::matmul_abt(a, b.transpose()), ab, 1e-15, 0).ok());
  CHECK(optimus::reference::compare(optimus::reference::matmul_atb(a.transpose(), b), ab, 1e-15, 0).ok());
  double s = 0;
  for (int l = 0; l < 3; ++l) s += a(1, l) * b(l, 2);
  CHECK(ab(1, 2) == doctest::Approx(s));
  CHECK(optimus::reference::random_block(1, 2, 2, 2, 9) == optimus::reference::random_matrix(3, 4, 9).block(1, 2, 2, 2));
}

// Comparing a result with the reference: |x - ref| <= atol + rtol * |ref| element by element
// (docs/design.md, "Verification"). NaN or Inf in x never passes.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <ostream>

namespace optimus::reference {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Comparison {
  std::int64_t wrong = 0;      // elements outside atol + rtol*|ref|, NaNs included
  double max_abs_error = 0.0;  // max |x - ref|
  double rel_error = 0.0;      // max |x - ref| / max |ref| (norm-wise relative error)
  bool shape_ok = true;

  bool ok() const { return shape_ok && wrong == 0; }
};

std::ostream& operator<<(std::ostream& os, const Comparison& c);

Comparison compare(const Eigen::Ref<const Matrix>& x, const Eigen::Ref<const Matrix>& ref, double atol, double rtol);

// The norm-wise test: atol = rel_tol * max|ref|, rtol = rel_tol.
Comparison compare_relative(const Eigen::Ref<const Matrix>& x, const Eigen::Ref<const Matrix>& ref, double rel_tol);

}  // namespace optimus::reference

// Element-wise comparison with a reference (atol + rtol*|ref|), NaN-aware.
#include "optimus/reference/compare.hpp"

#include <cmath>

namespace optimus::reference {

std::ostream& operator<<(std::ostream& os, const Comparison& c) {
  if (!c.shape_ok) return os << "shape mismatch";
  return os << "wrong=" << c.wrong << " max_abs_err=" << c.max_abs_error << " rel_err=" << c.rel_error;
}

Comparison compare(const Eigen::Ref<const Matrix>& x, const Eigen::Ref<const Matrix>& ref, double atol, double rtol) {
  Comparison c;
  if (x.rows() != ref.rows() || x.cols() != ref.cols()) {
    c.shape_ok = false;
    return c;
  }
  double ref_max = 0.0;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    for (Eigen::Index k = 0; k < x.cols(); ++k) {
      const double err = std::abs(x(r, k) - ref(r, k));
      const bool good = std::isfinite(x(r, k)) && err <= atol + rtol * std::abs(ref(r, k));
      if (!good) ++c.wrong;
      c.max_abs_error = std::isnan(err) || std::isnan(c.max_abs_error) ? NAN : std::max(c.max_abs_error, err);
      ref_max = std::max(ref_max, std::abs(ref(r, k)));
    }
  }
  c.rel_error = ref_max > 0 ? c.max_abs_error / ref_max : c.max_abs_error;
  return c;
}

Comparison compare_relative(const Eigen::Ref<const Matrix>& x, const Eigen::Ref<const Matrix>& ref, double rel_tol) {
  const double scale = ref.size() ? ref.cwiseAbs().maxCoeff() : 0.0;
  return compare(x, ref, rel_tol * scale, rel_tol);
}

}  // namespace optimus::reference

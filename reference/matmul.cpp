// Plain Eigen products and reference inputs.
#include "optimus/reference/matmul.hpp"

namespace optimus::reference {

Matrix matmul(const Eigen::Ref<const Matrix>& a, const Eigen::Ref<const Matrix>& b) { return a * b; }

Matrix matmul_abt(const Eigen::Ref<const Matrix>& a, const Eigen::Ref<const Matrix>& b) {
  return a * b.transpose();
}

Matrix matmul_atb(const Eigen::Ref<const Matrix>& a, const Eigen::Ref<const Matrix>& b) {
  return a.transpose() * b;
}

Matrix random_block(std::int64_t r0, std::int64_t c0, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                    Distribution dist, std::uint64_t stream) {
  const CounterRng rng(seed, stream);
  Matrix m(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      m(r, c) = dist.sample(rng, static_cast<std::uint64_t>(r0 + r), static_cast<std::uint64_t>(c0 + c));
    }
  }
  return m;
}

Matrix random_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed, Distribution dist,
                     std::uint64_t stream) {
  return random_block(0, 0, rows, cols, seed, dist, stream);
}

}  // namespace optimus::reference

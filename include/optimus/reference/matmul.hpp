// Reference products and inputs, in fp64 on full matrices, single process. The oracle every
// distributed result is checked against; it shares no code with grid/ or layers/.
#pragma once

#include <cstdint>

#include "optimus/core/rng.hpp"
#include "optimus/reference/compare.hpp"

namespace optimus::reference {

// A: [m, k], B: [k, n] -> [m, n]
Matrix matmul(const Eigen::Ref<const Matrix>& a, const Eigen::Ref<const Matrix>& b);
// A: [m, k], B: [n, k] -> A B^T: [m, n]
Matrix matmul_abt(const Eigen::Ref<const Matrix>& a, const Eigen::Ref<const Matrix>& b);
// A: [k, m], B: [k, n] -> A^T B: [m, n]
Matrix matmul_atb(const Eigen::Ref<const Matrix>& a, const Eigen::Ref<const Matrix>& b);

// The full rows x cols matrix with element (r, c) = dist.sample(CounterRng(seed, stream), r, c):
// what a distributed fill_random with the same arguments holds, gathered.
Matrix random_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                     Distribution dist = Distribution::uniform(-1.0, 1.0), std::uint64_t stream = 0);

// The rows [r0, r0 + rows) x columns [c0, c0 + cols) window of random_matrix(..., seed, dist, stream).
Matrix random_block(std::int64_t r0, std::int64_t c0, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                    Distribution dist = Distribution::uniform(-1.0, 1.0), std::uint64_t stream = 0);

}  // namespace optimus::reference

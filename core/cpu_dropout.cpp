// CPU backend: dropout, alone and fused into the block's residual paths (cpu_kernels.hpp), with the shared element
// arithmetic.
#include <algorithm>

#include "optimus/core/cpu_kernels.hpp"
#include "vector_clones.hpp"

namespace optimus::cpu {
namespace {

constexpr std::int64_t kPerDraw = math::kDropoutColumnsPerDraw;

// Dropout of the whole draws (groups of four columns) first_group .. first_group + groups - 1 of global row `row`,
// whose columns start at x: one Philox call per four elements, in integers (the loop vectorises).
template <class T>
OPTIMUS_VECTOR_CLONES void dropout_groups(T* x, std::int64_t groups, std::uint64_t threshold, T scale,
                                          std::uint64_t seed, std::uint64_t stream, std::uint64_t row,
                                          std::uint64_t first_group) {
  for (std::int64_t g = 0; g < groups; ++g) {
    std::uint32_t words[kPerDraw];
    math::dropout_words(seed, stream, row, first_group + static_cast<std::uint64_t>(g), words);
    for (std::int64_t lane = 0; lane < kPerDraw; ++lane) {
      x[g * kPerDraw + lane] = math::dropout(x[g * kPerDraw + lane], words[lane] >= threshold, scale);
    }
  }
}

// Dropout of n contiguous elements of global row `row` from global column col0: element by element
// (math::dropout_keeps) up to the first whole draw and after the last, whole draws between.
template <class T>
void dropout_row(T* x, std::int64_t n, double p, T scale, std::uint64_t seed, std::uint64_t stream, std::uint64_t row,
                 std::uint64_t col0) {
  const auto one = [&](std::int64_t c) {
    x[c] = math::dropout(x[c], math::dropout_keeps(p, seed, stream, row, col0 + static_cast<std::uint64_t>(c)), scale);
  };
  std::int64_t c = 0;
  for (; c < n && (col0 + static_cast<std::uint64_t>(c)) % kPerDraw != 0; ++c) one(c);
  const std::int64_t groups = (n - c) / kPerDraw;
  dropout_groups(x + c, groups, math::dropout_threshold(p), scale, seed, stream, row,
                 (col0 + static_cast<std::uint64_t>(c)) / kPerDraw);
  for (c += groups * kPerDraw; c < n; ++c) one(c);
}

}  // namespace

template <class T>
void dropout(TensorView<T> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
             std::uint64_t stream) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  for (std::int64_t r = 0; r < x.size(0); ++r) {  // rows contiguous (ops::dropout checks)
    dropout_row(&x(r, 0), x.size(1), p, scale, seed, stream, row0 + static_cast<std::uint64_t>(r), col0);
  }
}

// The residual kernels go row by row, the row still in cache when it is added to and summed: the same functions on
// each row as dropout, axpby and row_sums, so the same bits.
template <class T>
void dropout_residual(TensorView<const T> residual, TensorView<T> x, const ops::DropoutMask& mask,
                      TensorView<T> row_sums) {
  const std::int64_t cols = x.size(1);
  const T scale = static_cast<T>(1.0 / (1.0 - mask.p));
  for (std::int64_t r = 0; r < x.size(0); ++r) {  // rows contiguous (ops checks)
    T* row = &x(r, 0);
    const T* add = &residual(r, 0);
    if (mask.p > 0.0) {
      dropout_row(row, cols, mask.p, scale, mask.seed, mask.stream, mask.row0 + static_cast<std::uint64_t>(r),
                  mask.col0);
    }
    for (std::int64_t c = 0; c < cols; ++c) row[c] = math::axpby(T(1), add[c], T(1), row[c]);
    if (row_sums.rank() != 0) row_sums.data()[r] = row_sum(row, cols);
  }
}

template <class T>
void dropout_copy(TensorView<const T> x, TensorView<T> y, const ops::DropoutMask& mask) {
  const std::int64_t cols = x.size(1);
  const T scale = static_cast<T>(1.0 / (1.0 - mask.p));
  for (std::int64_t r = 0; r < x.size(0); ++r) {
    T* row = &y(r, 0);
    std::copy_n(&x(r, 0), cols, row);
    if (mask.p > 0.0) {
      dropout_row(row, cols, mask.p, scale, mask.seed, mask.stream, mask.row0 + static_cast<std::uint64_t>(r),
                  mask.col0);
    }
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                                  \
  template void dropout<T>(TensorView<T>, std::uint64_t, std::uint64_t, double, std::uint64_t, std::uint64_t);  \
  template void dropout_residual<T>(TensorView<const T>, TensorView<T>, const ops::DropoutMask&, TensorView<T>); \
  template void dropout_copy<T>(TensorView<const T>, TensorView<T>, const ops::DropoutMask&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::cpu

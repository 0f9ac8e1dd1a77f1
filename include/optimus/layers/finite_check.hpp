// For the layers and the model: Execution::check_finite's check of one tensor.
#pragma once

#include <cmath>
#include <string>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"

namespace optimus::detail {

// With m's grid checking (Grid::check_finite), throws on every rank of the grid the same optimus::Error naming `what`
// (a layer, a tensor and its pass: "h.0.attn forward output") and the first rank holding a NaN or an inf, with that
// element's global row and column; nothing otherwise. Collective over the grid when on.
template <class T>
void check_finite(const DistMatrix<T>& m, const std::string& what) {
  const Grid& grid = m.grid();
  if (!grid.check_finite()) return;
  const auto local = m.local_to_host();  // [rows/q, cols/q]
  double first = -1;                     // this rank's first bad element, as row-major index into its block
  for (std::int64_t e = 0; e < local.size() && first < 0; ++e) {
    if (!std::isfinite(static_cast<double>(local(e / local.cols(), e % local.cols())))) first = static_cast<double>(e);
  }
  const int me = grid.grid().rank(), ranks = grid.grid().size();
  const double bad_rank = grid.grid().all_reduce(first >= 0 ? static_cast<double>(me) : static_cast<double>(ranks),
                                                 ReduceOp::min);
  if (bad_rank >= ranks) return;
  // The first bad rank's element and value, sent to all.
  double where[3] = {0, 0, 0};
  if (me == static_cast<int>(bad_rank)) {
    const auto e = static_cast<std::int64_t>(first);
    const std::int64_t cols = m.local_cols();
    where[0] = static_cast<double>(m.row_offset() + e / cols);
    where[1] = static_cast<double>(m.col_offset() + e % cols);
    where[2] = static_cast<double>(local(e / cols, e % cols));
  }
  grid.grid().broadcast(where, 3, DType::f64, static_cast<int>(bad_rank));
  OPTIMUS_FAIL("check-finite: ", what, " holds ", where[2], " at [", static_cast<std::int64_t>(where[0]), ", ",
               static_cast<std::int64_t>(where[1]), "] of ", m.rows(), "x", m.cols(), " (first on grid rank ",
               static_cast<int>(bad_rank), ")");
}

// The same for a kept activation: its values as kept (bf16 widened), which the products read.
template <class T>
void check_finite(const SavedActivation<T>& s, const std::string& what) {
  if (!s.grid().check_finite()) return;
  DistMatrix<T> values = DistMatrix<T>::uninitialized(s.grid(), s.rows(), s.cols(), MemoryKind::workspace);
  Tensor<T> widened;
  ops::axpby<T>(T(1), s.values(widened), T(0), values.local(), s.grid().queue());  // beta = 0: a copy, NaN included
  check_finite(values, what);
}

}  // namespace optimus::detail

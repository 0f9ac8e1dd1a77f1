// Dropout on a DistMatrix block, with the mask drawn from global indices.
#include "optimus/layers/dropout.hpp"

#include "optimus/core/ops.hpp"

namespace optimus {

template <class T>
void apply_dropout(DistMatrix<T>& x, std::int64_t first_row, double p, std::uint64_t seed, std::uint64_t stream) {
  const std::int64_t row0 = first_row + x.row_offset();
  ops::dropout<T>(x.local(), static_cast<std::uint64_t>(row0), static_cast<std::uint64_t>(x.col_offset()), p, seed,
                  stream, x.grid().queue());
}

template void apply_dropout<float>(DistMatrix<float>&, std::int64_t, double, std::uint64_t, std::uint64_t);
template void apply_dropout<double>(DistMatrix<double>&, std::int64_t, double, std::uint64_t, std::uint64_t);

}  // namespace optimus

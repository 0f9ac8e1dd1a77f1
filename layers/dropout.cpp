// Dropout on a DistMatrix block, with the mask drawn from global indices.
#include "optimus/layers/dropout.hpp"

#include "optimus/core/ops.hpp"

namespace optimus {

template <class T>
void apply_dropout(DistMatrix<T>& x, double p, std::uint64_t seed, std::uint64_t stream) {
  // Rows count across data-parallel replicas (each holds the next x.rows() of the global batch), so dp
  // replicas draw the masks one replica would draw on the concatenated batch.
  const std::int64_t row0 = x.grid().dp_index * x.rows() + x.row_offset();
  ops::dropout<T>(x.local(), static_cast<std::uint64_t>(row0), static_cast<std::uint64_t>(x.col_offset()), p, seed,
                  stream, x.grid().queue);
}

template void apply_dropout<float>(DistMatrix<float>&, double, std::uint64_t, std::uint64_t);
template void apply_dropout<double>(DistMatrix<double>&, double, std::uint64_t, std::uint64_t);

}  // namespace optimus

// Dropout on a DistMatrix block, with the mask drawn from global indices.
#include "optimus/layers/dropout.hpp"

namespace optimus {

template <class T>
void apply_dropout(DistMatrix<T>& x, double p, std::uint64_t seed, std::uint64_t stream) {
  if (p <= 0.0) return;
  const CounterRng rng(seed, stream);
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  auto X = x.local_map();
  // Rows count across data-parallel replicas (each holds the next x.rows() of the global batch), so dp
  // replicas draw the masks one replica would draw on the concatenated batch.
  const std::int64_t row0 = x.grid().dp_index * x.rows() + x.row_offset();
  for (std::int64_t r = 0; r < x.local_rows(); ++r) {
    for (std::int64_t c = 0; c < x.local_cols(); ++c) {
      const bool keep = rng.uniform(static_cast<std::uint64_t>(row0 + r),
                                    static_cast<std::uint64_t>(x.col_offset() + c)) >= p;
      X(r, c) = keep ? X(r, c) * scale : T(0);
    }
  }
}

template void apply_dropout<float>(DistMatrix<float>&, double, std::uint64_t, std::uint64_t);
template void apply_dropout<double>(DistMatrix<double>&, double, std::uint64_t, std::uint64_t);

}  // namespace optimus

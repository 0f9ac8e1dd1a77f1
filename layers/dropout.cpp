// Dropout on a DistMatrix block, with the mask drawn from global indices.
#include "optimus/layers/dropout.hpp"

#include "optimus/core/ops.hpp"

namespace optimus {

template <class T>
ops::DropoutMask dropout_mask(const DistMatrix<T>& x, std::int64_t first_row, double p, std::uint64_t seed,
                              std::uint64_t stream) {
  return {.row0 = static_cast<std::uint64_t>(first_row + x.row_offset()),
          .col0 = static_cast<std::uint64_t>(x.col_offset()), .p = p, .seed = seed, .stream = stream};
}

template <class T>
void apply_dropout(DistMatrix<T>& x, std::int64_t first_row, double p, std::uint64_t seed, std::uint64_t stream) {
  const ops::DropoutMask m = dropout_mask(x, first_row, p, seed, stream);
  ops::dropout<T>(x.local(), m.row0, m.col0, m.p, m.seed, m.stream, x.grid().queue());
}

template ops::DropoutMask dropout_mask<float>(const DistMatrix<float>&, std::int64_t, double, std::uint64_t,
                                              std::uint64_t);
template ops::DropoutMask dropout_mask<double>(const DistMatrix<double>&, std::int64_t, double, std::uint64_t,
                                               std::uint64_t);
template void apply_dropout<float>(DistMatrix<float>&, std::int64_t, double, std::uint64_t, std::uint64_t);
template void apply_dropout<double>(DistMatrix<double>&, std::int64_t, double, std::uint64_t, std::uint64_t);

}  // namespace optimus

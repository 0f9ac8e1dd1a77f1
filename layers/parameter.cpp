// Initialization, loading and gathering of parameters through their ShardLayout.
#include "optimus/layers/parameter.hpp"

#include <vector>

#include "optimus/core/error.hpp"

namespace optimus {

std::int64_t ShardLayout::original_column(std::int64_t internal) const {
  if (qkv_hidden == 0) return internal;
  const std::int64_t h = qkv_hidden, block = 3 * h / q, part_width = h / q;
  const std::int64_t jb = internal / block, rem = internal % block;
  return (rem / part_width) * h + jb * part_width + rem % part_width;  // part 0, 1, 2 = Q, K, V
}

std::pair<std::int64_t, std::int64_t> ShardLayout::global(std::int64_t lr, std::int64_t lc) const {
  if (kind == Kind::block) return {i * local_rows() + lr, original_column(j * (cols / q) + lc)};
  return {0, original_column(j * (cols / q) + i * local_cols() + lc)};
}

ShardLayout ShardLayout::on_rank(int row, int col) const {
  ShardLayout other = *this;
  other.i = row;
  other.j = col;
  return other;
}

template <class T>
void init_parameter(const ParameterRef<T>& p, const GptConfig& config) {
  const CounterRng rng(config.seed, parameter_stream(p.name));
  const Distribution dist = initial_distribution(config, p.name);
  for (std::int64_t r = 0; r < p.layout.local_rows(); ++r) {
    for (std::int64_t c = 0; c < p.layout.local_cols(); ++c) {
      const auto [gr, gc] = p.layout.global(r, c);
      p.value(r, c) = static_cast<T>(dist.sample(rng, static_cast<std::uint64_t>(gr), static_cast<std::uint64_t>(gc)));
    }
  }
}

template <class T>
void load_parameter(const ParameterRef<T>& p, const GlobalMatrix& full) {
  OPTIMUS_CHECK(full.rows() == p.layout.rows && full.cols() == p.layout.cols, "load_global: '", p.name, "' is ",
                p.layout.rows, "x", p.layout.cols, " but the given tensor is ", full.rows(), "x", full.cols());
  for (std::int64_t r = 0; r < p.layout.local_rows(); ++r) {
    for (std::int64_t c = 0; c < p.layout.local_cols(); ++c) {
      const auto [gr, gc] = p.layout.global(r, c);
      p.value(r, c) = static_cast<T>(full(gr, gc));
    }
  }
}

template <class T>
GlobalMatrix gather_parameter(const Grid& grid, const ParameterRef<T>& p, bool gradient) {
  const TensorView<T>& mine = gradient ? p.grad : p.value;
  const std::int64_t lr = p.layout.local_rows(), lc = p.layout.local_cols(), n = lr * lc;
  const int q = grid.q();
  std::vector<T> all(static_cast<std::size_t>(n * q * q));
  grid.grid().all_gather(mine.data(), all.data(), static_cast<std::size_t>(n), dtype_of<T>);
  GlobalMatrix full(p.layout.rows, p.layout.cols);
  for (int rank = 0; rank < q * q; ++rank) {
    const ShardLayout there = p.layout.on_rank(rank / q, rank % q);
    const T* block = all.data() + static_cast<std::ptrdiff_t>(rank) * n;
    for (std::int64_t r = 0; r < lr; ++r) {
      for (std::int64_t c = 0; c < lc; ++c) {
        const auto [gr, gc] = there.global(r, c);
        full(gr, gc) = static_cast<double>(block[r * lc + c]);
      }
    }
  }
  return full;
}

#define OPTIMUS_INSTANTIATE(T)                                                       \
  template void init_parameter<T>(const ParameterRef<T>&, const GptConfig&);         \
  template void load_parameter<T>(const ParameterRef<T>&, const GlobalMatrix&);      \
  template GlobalMatrix gather_parameter<T>(const Grid&, const ParameterRef<T>&, bool);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus

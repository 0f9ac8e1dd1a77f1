// Initialization, loading and gathering of parameters through their ShardLayout.
#include "optimus/layers/parameter.hpp"

#include <vector>

#include "optimus/core/error.hpp"

namespace optimus {

std::int64_t ShardLayout::local_rows() const {
  switch (kind) {
    case Kind::block: return rows / q;
    case Kind::rows: return rows / parts;
    case Kind::vector: return 1;
    case Kind::columns:
    case Kind::replicated: return rows;
  }
  return 0;
}

std::int64_t ShardLayout::local_cols() const {
  switch (kind) {
    case Kind::block: return cols / q;
    case Kind::vector: return cols / (q * q);
    case Kind::columns: return cols / parts;
    case Kind::rows:
    case Kind::replicated: return cols;
  }
  return 0;
}

std::int64_t ShardLayout::original_column(std::int64_t internal) const {
  if (qkv_hidden == 0) return internal;
  const std::int64_t groups = kind == Kind::columns ? parts : q;
  const std::int64_t h = qkv_hidden, block = 3 * h / groups, part_width = h / groups;
  const std::int64_t group = internal / block, rem = internal % block;
  return (rem / part_width) * h + group * part_width + rem % part_width;  // 0, 1, 2 = Q, K, V
}

std::pair<std::int64_t, std::int64_t> ShardLayout::global(std::int64_t lr, std::int64_t lc) const {
  switch (kind) {
    case Kind::block: return {i * local_rows() + lr, original_column(j * (cols / q) + lc)};
    case Kind::vector: return {0, original_column(j * (cols / q) + i * local_cols() + lc)};
    case Kind::columns: return {lr, original_column(part * local_cols() + lc)};
    case Kind::rows: return {part * local_rows() + lr, original_column(lc)};
    case Kind::replicated: return {lr, original_column(lc)};
  }
  return {0, 0};
}

ShardLayout ShardLayout::on_rank(int rank) const {
  ShardLayout other = *this;
  other.i = rank / q;
  other.j = rank % q;
  other.part = rank;
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
GlobalMatrix gather_parameter(Communicator& comm, const ParameterRef<T>& p, bool gradient) {
  const TensorView<T>& mine = gradient ? p.grad : p.value;
  const std::int64_t lr = p.layout.local_rows(), lc = p.layout.local_cols(), n = lr * lc;
  const int ranks = comm.size();
  std::vector<T> all(static_cast<std::size_t>(n * ranks));
  comm.all_gather(mine.data(), all.data(), static_cast<std::size_t>(n), dtype_of<T>);
  GlobalMatrix full(p.layout.rows, p.layout.cols);
  for (int rank = 0; rank < ranks; ++rank) {
    const ShardLayout there = p.layout.on_rank(rank);
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
  template GlobalMatrix gather_parameter<T>(Communicator&, const ParameterRef<T>&, bool);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus

// DistMatrix: block ownership, partition-independent random fill, and gathering to the full matrix.
#include "optimus/grid/dist_matrix.hpp"

#include "optimus/core/device_memory.hpp"
#include "optimus/core/error.hpp"

namespace optimus {
namespace {

std::int64_t block_size(std::int64_t n, int q, const char* dimension) {
  OPTIMUS_CHECK(n >= 0, "DistMatrix: ", dimension, " = ", n, " is negative");
  OPTIMUS_CHECK(n % q == 0, "DistMatrix: ", dimension, " = ", n, " is not divisible by q = ", q);
  return n / q;
}

// A rank's block of a rows x cols matrix on a q x q grid, or an error naming the dimension q does not divide.
Shape block_shape(const Grid& grid, std::int64_t rows, std::int64_t cols) {
  return Shape{block_size(rows, grid.q(), "rows"), block_size(cols, grid.q(), "cols")};
}

}  // namespace

template <class T>
DistMatrix<T>::DistMatrix(const Grid& grid, std::int64_t rows, std::int64_t cols, MemoryKind kind)
    : DistMatrix(grid, rows, cols, Tensor<T>(block_shape(grid, rows, cols), grid.tag(kind))) {}

template <class T>
DistMatrix<T>::DistMatrix(const Grid& grid, std::int64_t rows, std::int64_t cols, MemoryTag tag)
    : DistMatrix(grid, rows, cols, Tensor<T>(block_shape(grid, rows, cols), tag)) {}

template <class T>
DistMatrix<T> DistMatrix<T>::uninitialized(const Grid& grid, std::int64_t rows, std::int64_t cols, MemoryKind kind) {
  return DistMatrix(grid, rows, cols, Tensor<T>(block_shape(grid, rows, cols), grid.tag(kind), Init::none));
}

template <class T>
void DistMatrix<T>::load_local(const Matrix& block) {
  OPTIMUS_CHECK(block.rows() == local_rows() && block.cols() == local_cols(), "DistMatrix::load_local: block is ",
                block.rows(), "x", block.cols(), ", the local block is ", local_rows(), "x", local_cols());
  copy_bytes(local_.device_memory(), local_.data(), block.data(), local_.bytes());
}

template <class T>
typename DistMatrix<T>::Matrix DistMatrix<T>::local_to_host() const {
  Matrix block(local_rows(), local_cols());
  copy_bytes(local_.device_memory(), block.data(), local_.data(), local_.bytes());
  return block;
}

template <class T>
void DistMatrix<T>::fill_random(std::uint64_t seed, Distribution dist, std::uint64_t stream) {
  const CounterRng rng(seed, stream);
  Matrix block(local_rows(), local_cols());  // drawn on the host, then copied to where the block lives
  for (std::int64_t r = 0; r < local_rows(); ++r) {
    for (std::int64_t c = 0; c < local_cols(); ++c) {
      block(r, c) = static_cast<T>(dist.sample(rng, static_cast<std::uint64_t>(row_offset() + r),
                                               static_cast<std::uint64_t>(col_offset() + c)));
    }
  }
  load_local(block);
}

// Two all-gathers: along the row (q blocks -> one strip of local_rows x cols), then along the column
// (q strips stacked in row order are the full row-major matrix).
template <class T>
typename DistMatrix<T>::Matrix DistMatrix<T>::to_global() const {
  const int q = grid_.q();
  const std::int64_t lr = local_rows();
  const std::int64_t lc = local_cols();
  const Matrix mine = local_to_host();  // gathered on the host, wherever the blocks live
  Matrix row_blocks(lr * q, lc);        // block jj at rows [jj*lr, (jj+1)*lr)
  grid_.row().all_gather(mine.data(), row_blocks.data(), static_cast<std::size_t>(lr * lc), dtype_of<T>);
  Matrix strip(lr, cols_);
  for (int jj = 0; jj < q; ++jj) strip.middleCols(jj * lc, lc) = row_blocks.middleRows(jj * lr, lr);
  Matrix full(rows_, cols_);
  grid_.col().all_gather(strip.data(), full.data(), static_cast<std::size_t>(lr * cols_), dtype_of<T>);
  return full;
}

template <class T>
DistMatrix<T> DistMatrix<T>::clone_as(MemoryKind kind) const {
  DistMatrix copy(grid_, rows_, cols_, kind);
  copy_bytes(local_.device_memory(), copy.local_.data(), local_.data(), local_.bytes());
  return copy;
}

template <class T>
DistMatrix<T> DistMatrix<T>::clone() const {
  return DistMatrix(grid_, rows_, cols_, local_.clone());
}

template class DistMatrix<float>;
template class DistMatrix<double>;

}  // namespace optimus

// optimus::DistMatrix<T>: a global rows x cols row-major matrix split into q x q blocks (docs/design.md,
// "Partitioning").
//
// Rank (i, j) owns rows [i*rows/q, (i+1)*rows/q) and columns [j*cols/q, (j+1)*cols/q): a local block of
// (rows/q) x (cols/q). For a 4 x 6 matrix on q = 2, rank (1, 0) holds rows 2..3, columns 0..2.
// q must divide both dimensions; otherwise construction throws, naming the dimension, its size and q.
// A DistMatrix holds a handle to its Grid (the grid lives as long as its matrices). Copies are explicit (clone()).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus {

template <class T>
class DistMatrix {
 public:
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using LocalMap = Eigen::Map<Matrix>;
  using ConstLocalMap = Eigen::Map<const Matrix>;

  // A zero matrix of global shape rows x cols on `grid`; its local block is counted by the grid's
  // MemoryTracker as `kind` and lives where the grid places its matrices (Grid::place_on).
  DistMatrix(const Grid& grid, std::int64_t rows, std::int64_t cols, MemoryKind kind = MemoryKind::workspace);
  // The same with the local block counted and placed as `tag` says instead of as the grid places its matrices (a
  // spilled block's parameters live in page-locked host memory: layers/spill.hpp).
  DistMatrix(const Grid& grid, std::int64_t rows, std::int64_t cols, MemoryTag tag);

  // A matrix like DistMatrix(grid, rows, cols, kind) whose elements are unspecified until written: for the output of an
  // operation that writes every element (a product with beta = 0, LayerNorm's y), sparing a pass that zeroes it.
  static DistMatrix uninitialized(const Grid& grid, std::int64_t rows, std::int64_t cols, MemoryKind kind);

  // Every rank passes the same full matrix; each keeps its own block. No communication.
  template <class Derived>
  static DistMatrix from_global(const Grid& grid, const Eigen::MatrixBase<Derived>& full) {
    DistMatrix m(grid, full.rows(), full.cols());
    const Matrix block = full.block(m.row_offset(), m.col_offset(), m.local_rows(), m.local_cols()).template cast<T>();
    m.load_local(block);
    return m;
  }

  // Copies a host block [local_rows, local_cols] in, or this rank's block out to the host (wherever it lives).
  void load_local(const Matrix& block);
  Matrix local_to_host() const;

  // Element (r, c) becomes dist.sample(CounterRng(seed, stream), r, c): the same matrix whatever q is.
  void fill_random(std::uint64_t seed, Distribution dist = Distribution::uniform(-1.0, 1.0), std::uint64_t stream = 0);

  // Collective over the grid: every rank of the replica gets the whole matrix.
  Matrix to_global() const;

  DistMatrix clone() const;                  // counted as the same kind
  DistMatrix clone_as(MemoryKind kind) const;  // counted as `kind`
  // Frees the local block (and its count); the matrix keeps its shape but must not be used until reassigned.
  void release() { local_.reset(); }
  // Moves the local block out (with its memory count); the same caveat as release().
  Tensor<T> take_local() { return std::move(local_); }
  // The local block's tensor itself, for moving it between memories by exchanging it with a tensor of the same shape
  // elsewhere (a spilled block, layers/spill.hpp): the matrix then computes with wherever that tensor lives.
  Tensor<T>& storage() { return local_; }
  DistMatrix(DistMatrix&&) noexcept = default;
  DistMatrix& operator=(DistMatrix&&) noexcept = default;
  DistMatrix(const DistMatrix&) = delete;
  DistMatrix& operator=(const DistMatrix&) = delete;

  std::int64_t rows() const { return rows_; }
  MemoryKind kind() const { return local_.tag().kind; }  // how the grid's tracker counts the block
  std::int64_t cols() const { return cols_; }
  std::int64_t local_rows() const { return local_.size(0); }
  std::int64_t local_cols() const { return local_.size(1); }
  std::int64_t row_offset() const { return i_ * local_rows(); }
  std::int64_t col_offset() const { return j_ * local_cols(); }

  TensorView<T> local() { return local_.view(); }
  TensorView<const T> local() const { return local_.view(); }
  // Eigen views of a host block (a block on a device throws: use local(), or local_to_host()).
  LocalMap local_map() { return LocalMap(host_data(), local_rows(), local_cols()); }
  ConstLocalMap local_map() const { return ConstLocalMap(host_data(), local_rows(), local_cols()); }

  const Grid& grid() const { return grid_; }

 private:
  T* host_data() const {
    OPTIMUS_CHECK(local_.device() == Device::cpu, "DistMatrix: an Eigen view of a block on a device; use local()");
    return const_cast<T*>(local_.data());
  }
  DistMatrix(const Grid& grid, std::int64_t rows, std::int64_t cols, Tensor<T> local)
      : grid_(grid), i_(grid.row_index()), j_(grid.col_index()), rows_(rows), cols_(cols),
        local_(std::move(local)) {}

  Grid grid_;
  int i_, j_;  // this rank's grid row and column
  std::int64_t rows_;
  std::int64_t cols_;
  Tensor<T> local_;  // [rows/q, cols/q]
};

extern template class DistMatrix<float>;
extern template class DistMatrix<double>;

}  // namespace optimus

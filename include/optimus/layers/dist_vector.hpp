// optimus::DistVector<T>: a global vector of n elements (a bias, LayerNorm's gamma or beta) split into
// q*q pieces so that no rank stores a replica (docs/design.md, "Partitioning"). Rank (i, j) owns the n/q^2 elements
//     [j*n/q + i*n/q^2, j*n/q + (i+1)*n/q^2)
// i.e. column block j of the vector (the part grid column j needs) split along the grid column.
// For n = 8, q = 2: rank (0,0) holds 0..1, (1,0) 2..3, (0,1) 4..5, (1,1) 6..7.
#pragma once

#include "optimus/core/tensor.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus {

template <class T>
class DistVector {
 public:
  // Throws if q*q does not divide n, naming n and q.
  DistVector(const Grid& grid, std::int64_t n, MemoryKind kind, const char* what);
  // The same, counted and placed as `tag` says instead of as the grid places its matrices (layers/spill.hpp).
  DistVector(const Grid& grid, std::int64_t n, MemoryTag tag, const char* what);

  std::int64_t size() const { return n_; }
  std::int64_t local_size() const { return local_.numel(); }
  std::int64_t offset() const;  // global index of this rank's first element
  // The piece's tensor itself [n/q^2], to exchange with one of the same shape elsewhere (DistMatrix::storage).
  Tensor<T>& storage() { return local_; }

  // This rank's piece as [1, n/q^2], on the device it lives on.
  TensorView<T> local() { return TensorView<T>(local_.data(), Shape{1, local_size()}, local_.device()); }
  TensorView<const T> local() const {
    return TensorView<const T>(local_.data(), Shape{1, local_size()}, local_.device());
  }

  // All-gather along the grid column: out [1, n/q] receives column block j of the vector.
  void gather_column_block(TensorView<T> out) const;
  // Reduce-scatter along the grid column: partial [1, n/q] (this rank's contribution to column block j)
  // is summed over the column, and this rank's piece is added to local().
  void add_reduced_column_block(TensorView<const T> partial);

 private:
  Grid grid_;
  std::int64_t n_;
  Tensor<T> local_;  // [n/q^2]
};

extern template class DistVector<float>;
extern template class DistVector<double>;

}  // namespace optimus

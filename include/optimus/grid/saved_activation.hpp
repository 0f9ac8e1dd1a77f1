// optimus::SavedActivation<T>: a DistMatrix a layer keeps for its backward pass, at the precision of mixed precision.
//
// With T = float on a grid whose GEMM math is bf16 (Execution::gemm_math), the block is kept in bf16: half the bytes
// of f32. Otherwise (f64, or f32/tf32 math) it is kept as it is. Backward reads it in two ways:
//   * as an operand of SUMMA products (summa.hpp takes a SavedActivation wherever it takes a DistMatrix): those
//     products take bf16 operands anyway, so a GEMM input kept in bf16 gives bitwise the products of the f32
//     matrix, and it is cast once instead of per product;
//   * as values for element-wise work (LayerNorm's xhat, GELU's input): values() widens the bf16 copy to T, so the
//     backward computes with the bf16 rounding of what the forward had (mixed precision: ~1e-2 relative).
#pragma once

#include <cstdint>

#include "optimus/core/dtype.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/dist_matrix.hpp"

namespace optimus {

template <class T>
class SavedActivation {
 public:
  // Whether activations saved on `grid` are kept in bf16: T = float and the grid's GEMM math is bf16.
  static bool keeps_bf16(const Grid& grid);

  // A copy of m's local block [rows/q, cols/q], counted by the grid's tracker as `kind`, in bf16 or T.
  SavedActivation(const DistMatrix<T>& m, MemoryKind kind);
  // The same from a matrix the caller gives up: its block is kept without a copy when it stays in T and is already
  // counted as `kind`.
  SavedActivation(DistMatrix<T>&& m, MemoryKind kind);
  // A block [rows/q, cols/q] for a kernel to write in the kept precision itself (through storage() or bf16_storage(),
  // whichever is_bf16() says; LayerNorm2D::forward_saved), counted as `kind`: no copy in T is ever made.
  static SavedActivation uninitialized(const Grid& grid, std::int64_t rows, std::int64_t cols, MemoryKind kind);

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t local_rows() const { return rows_ / grid_.q(); }
  const Grid& grid() const { return grid_; }
  bool is_bf16() const { return is_bf16_; }
  // The block as kept: block() unless is_bf16(), bf16_block() if it is; the other is empty.
  TensorView<const T> block() const { return block_.view(); }
  TensorView<const bf16> bf16_block() const { return bf16_block_.view(); }
  // The block's values in T: block() itself, or the bf16 copy widened into `scratch` (allocated here as the grid's
  // workspace; keep it alive while the view is used).
  TensorView<const T> values(Tensor<T>& scratch) const;
  // The tensors that hold the block (one of them empty), to move it between memories by exchanging them with tensors
  // of the same shape elsewhere (activation offload, layers/spill.hpp); the block must be back before it is read.
  Tensor<T>& storage() { return block_; }
  Tensor<bf16>& bf16_storage() { return bf16_block_; }

 private:
  SavedActivation(const Grid& grid, std::int64_t rows, std::int64_t cols);  // nothing kept yet
  void keep(TensorView<const T> local, MemoryKind kind);  // copies (or casts) `local` into the kept block

  Grid grid_;
  std::int64_t rows_, cols_;
  bool is_bf16_;
  Tensor<T> block_;          // [rows/q, cols/q] unless kept in bf16
  Tensor<bf16> bf16_block_;  // [rows/q, cols/q] when kept in bf16
};

extern template class SavedActivation<float>;
extern template class SavedActivation<double>;

}  // namespace optimus

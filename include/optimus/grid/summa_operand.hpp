// Operands of SUMMA products (summa.hpp): a DistMatrix, or a SavedOperand kept for a later product.
//
// A layer keeps its inputs for the products of its backward pass (Linear2D: dW += X^T dY needs X). Those products
// take bf16 operands when T = float and the grid's GEMM math is bf16 (Grid::set_gemm_math), so a SavedOperand keeps
// its copy of the block in bf16 there: half the bytes of an f32 copy, cast once, and the same bf16 values the
// product would have cast the f32 block to; results are bitwise those of products on the DistMatrix itself.
// Otherwise (f64, or f32/tf32 math) it keeps a plain copy. The SUMMA functions take either through SummaOperand.
#pragma once

#include <cstdint>

#include "optimus/core/dtype.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/dist_matrix.hpp"

namespace optimus {

template <class T>
class SavedOperand {
 public:
  // A copy of m's local block [rows/q, cols/q], counted by the grid's tracker as `kind`; bf16 when the grid's
  // products take bf16 operands (T = float with bf16 GEMM math), T otherwise.
  SavedOperand(const DistMatrix<T>& m, MemoryKind kind);

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  const detail::GridState& grid() const { return *grid_; }
  bool is_bf16() const { return is_bf16_; }
  // The block as kept: block() when !is_bf16(), bf16_block() when is_bf16(); the other is empty.
  TensorView<const T> block() const { return block_.view(); }
  TensorView<const bf16> bf16_block() const { return bf16_block_.view(); }

 private:
  const detail::GridState* grid_;
  std::int64_t rows_, cols_;
  bool is_bf16_;
  Tensor<T> block_;          // [rows/q, cols/q] unless kept in bf16
  Tensor<bf16> bf16_block_;  // [rows/q, cols/q] when kept in bf16
};

// What a product reads of one operand (non-owning; the matrix must outlive the product's call, and a pending
// product's finish()). Converts implicitly from both, so the SUMMA functions accept either.
template <class T>
struct SummaOperand {
  SummaOperand(const DistMatrix<T>& m)  // NOLINT(google-explicit-constructor): a DistMatrix is an operand
      : grid(&m.grid()), rows(m.rows()), cols(m.cols()), block(m.local()) {}
  SummaOperand(const SavedOperand<T>& s)  // NOLINT(google-explicit-constructor): so is a saved one
      : grid(&s.grid()), rows(s.rows()), cols(s.cols()), is_bf16(s.is_bf16()), block(s.block()),
        bf16_block(s.bf16_block()) {}

  const detail::GridState* grid;
  std::int64_t rows, cols;
  bool is_bf16 = false;               // only a bf16 copy is kept
  TensorView<const T> block;          // [rows/q, cols/q] unless is_bf16
  TensorView<const bf16> bf16_block;  // [rows/q, cols/q] when is_bf16
};

extern template class SavedOperand<float>;
extern template class SavedOperand<double>;

}  // namespace optimus

// SUMMA products of DistMatrix (docs/design.md, "SUMMA"), in global-matrix terms:
//
//   summa_ab (alpha, A, B, beta, C):  C = alpha * A   * B   + beta * C   A: [m, k]  B: [k, n]  C: [m, n]
//   summa_abt(alpha, A, B, beta, C):  C = alpha * A   * B^T + beta * C   A: [m, k]  B: [n, k]  C: [m, n]
//   summa_atb(alpha, A, B, beta, C):  C = alpha * A^T * B   + beta * C   A: [k, m]  B: [k, n]  C: [m, n]
//
// and the forms without C return a new matrix (alpha = 1, beta = 0). All are collective over the grid.
// Per SUMMA step l = 0..q-1 at rank (i, j):
//   AB : broadcast A[i,l] along row i and B[l,j] along column j;  C[i,j] += A[i,l] B[l,j]
//   ABT: broadcast B[l,j] along column j;  T = A[i,j] B[l,j]^T;  reduce T along row i to C[i,l]
//   ATB: broadcast A[i,l] along row i;     T = A[i,l]^T B[i,j];  reduce T along column j to C[l,j]
// Worked example, AB on q = 2: rank (0,1) receives A[0,0] from (0,0) and B[0,1] from (1,1) at l = 0,
// keeps its own A[0,1] and receives B[1,1] from (1,1)... at l = 1, and sums the two products.
// With grid.overlap() (the default) the panels of step l+1 are broadcast (double-buffered) and step l's partial
// product reduced while the next GEMM runs; the panels are BroadcastViews, so in-process ranks on host memory multiply
// the root's block where it lies instead of a copy. Without it every step waits for its communication. Both give
// bitwise-identical results: the same GEMMs in the same order, the same reductions.
// Each rank receives (q-1)/q^2 of the two moving matrices (A and B for AB; B and C for ABT; A and C for
// ATB), which tests assert against the communicators' counters.
// A product executes as the grid handle of its first operand says (grid/execution.hpp: overlap, GEMM math, timeline).
// Mixed precision: on a handle computing in bf16 (Grid::with, Execution::gemm_math), f32 products cast each rank's
// blocks of A and B to bf16 once, broadcast bf16 panels (half the bytes of those matrices) and multiply them with f32
// accumulation; partial products, their reductions and C stay f32. f64 products are unaffected.
// An operand may be a SavedActivation: a copy a layer kept for its backward pass, in bf16 under bf16 math; the
// products then use that copy instead of casting (the same values: results are bitwise the same). So may a weight's
// bf16 copy (SummaOperand(matrix, copy)).
// Errors (every rank throws the same): inner dimensions or C's shape that do not match, matrices from
// different grids, C that is also an input, an operand saved in bf16 on a grid whose math is no longer bf16.
//
// summa_abt_async / summa_atb_async run every GEMM but return with the last step's reduction still in flight, so
// that the caller can compute something else meanwhile (Linear2D's backward computes dW while dX's reduction
// runs). C is written by PendingProduct::finish() — at q = 1, where nothing is reduced, by the call itself, which
// returns the product finished; the results are bitwise those of the blocking forms.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "optimus/core/dtype.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"

namespace optimus {

// What a product reads of one operand (non-owning; the matrix must outlive the product's call, and a pending
// product's finish()). Converts implicitly from both kinds of operand.
template <class T>
struct SummaOperand {
  SummaOperand(const DistMatrix<T>& m)  // NOLINT(google-explicit-constructor): a DistMatrix is an operand
      : grid(&m.grid()), rows(m.rows()), cols(m.cols()), block(m.local()) {}
  SummaOperand(const SavedActivation<T>& s)  // NOLINT(google-explicit-constructor): so is a saved one
      : grid(&s.grid()), rows(s.rows()), cols(s.cols()), is_bf16(s.is_bf16()), block(s.block()),
        bf16_block(s.bf16_block()) {}
  // m as a bf16 copy of its local block [rows/q, cols/q] that the caller keeps current (a weight's: WeightCopy).
  SummaOperand(const DistMatrix<T>& m, TensorView<const bf16> copy)
      : grid(&m.grid()), rows(m.rows()), cols(m.cols()), is_bf16(true), bf16_block(copy) {}

  const Grid* grid;
  std::int64_t rows, cols;
  bool is_bf16 = false;               // only a bf16 copy is kept
  TensorView<const T> block;          // [rows/q, cols/q] unless is_bf16
  TensorView<const bf16> bf16_block;  // [rows/q, cols/q] when is_bf16
};

// m's block in T: its block, or its bf16 copy widened into `scratch` (allocated as its grid's workspace; keep it alive
// while the view is used), for work on the block itself (the 1D baseline's local products).
template <class T>
TensorView<const T> operand_values(const SummaOperand<T>& m, Tensor<T>& scratch);

// A (read-only) operand of the forms with alpha and C: a DistMatrix<T> or a SavedActivation<T> (saved_activation.hpp).
// T is deduced from alpha and C.
template <class T>
using OperandIn = const std::type_identity_t<SummaOperand<T>>&;

// A reduce-based product (ABT or ATB) whose reductions may still be in flight. finish() waits for them and sets
// C = alpha * (reduced sum) + beta * C (and does nothing once finished). Until then C is unchanged and the operands
// and C must stay alive. At q = 1 the product is finished when it is returned: C holds it.
// Move-only; destroying an unfinished product finishes it (every rank posted the same reductions, so the wait
// completes) but swallows errors: call finish().
template <class T>
class PendingProduct {
 public:
  // A product with nothing left to do (q = 1: C written at once).
  explicit PendingProduct(const Grid& grid);
  // sent: the buffers the reductions send from, kept alive until they complete.
  PendingProduct(const Grid& grid, T alpha, T beta, DistMatrix<T>& c, Tensor<T> sum,
                 std::vector<Tensor<T>> sent, std::vector<Request> reductions);
  PendingProduct(PendingProduct&& other) noexcept
      : grid_(other.grid_),
        alpha_(other.alpha_),
        beta_(other.beta_),
        c_(std::exchange(other.c_, nullptr)),  // the moved-from product has nothing left to finish
        sum_(std::move(other.sum_)),
        sent_(std::move(other.sent_)),
        reductions_(std::move(other.reductions_)) {}
  PendingProduct& operator=(PendingProduct&&) = delete;
  PendingProduct(const PendingProduct&) = delete;
  PendingProduct& operator=(const PendingProduct&) = delete;
  ~PendingProduct();

  void finish();
  bool finished() const { return c_ == nullptr; }

 private:
  Grid grid_;
  T alpha_, beta_;
  DistMatrix<T>* c_;  // null once finished
  Tensor<T> sum_;     // this rank's reduced term: [rows/q, cols/q] of C
  std::vector<Tensor<T>> sent_;
  std::vector<Request> reductions_;  // declared last: destroyed (waited for) before the buffers they use
};

template <class T>
[[nodiscard]] PendingProduct<T> summa_abt_async(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c);
template <class T>
[[nodiscard]] PendingProduct<T> summa_atb_async(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c);

template <class T>
void summa_ab(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c);
// The same, with an epilogue (a bias, or a bias and GELU: ops::Epilogue, on C's local block [m/q, n/q]) applied to C
// by the last step's GEMM: fused into it where cuBLASLt offers it.
template <class T>
void summa_ab(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c, const ops::Epilogue<T>& epilogue);
template <class T>
void summa_abt(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c);
template <class T>
void summa_atb(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c);

template <class T>
DistMatrix<T> summa_ab(const DistMatrix<T>& a, const DistMatrix<T>& b);
template <class T>
DistMatrix<T> summa_abt(const DistMatrix<T>& a, const DistMatrix<T>& b);
template <class T>
DistMatrix<T> summa_atb(const DistMatrix<T>& a, const DistMatrix<T>& b);

}  // namespace optimus

// The three SUMMA products on the q x q grid (see summa.hpp for what each computes and moves).
#include "optimus/grid/summa.hpp"

#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus {
namespace {

using cpu::Trans;

template <class T>
std::size_t count_of(const TensorView<T>& v) {
  return static_cast<std::size_t>(v.numel());
}

// Shape and grid checks shared by the three products. `op` names the product for the message;
// (m, k) and (kb, n) are op(A)'s and op(B)'s global shapes.
template <class T>
void check_operands(const char* op, const DistMatrix<T>& a, const DistMatrix<T>& b, const DistMatrix<T>& c,
                    std::int64_t m, std::int64_t k, std::int64_t kb, std::int64_t n) {
  OPTIMUS_CHECK(a.same_grid(b) && a.same_grid(c), op, ": the matrices belong to different grids");
  OPTIMUS_CHECK(&c != &a && &c != &b, op, ": the output C must not be one of the inputs");
  OPTIMUS_CHECK(k == kb, op, ": inner dimensions differ: A is ", a.rows(), "x", a.cols(), ", B is ", b.rows(), "x",
                b.cols(), " (", k, " != ", kb, ")");
  OPTIMUS_CHECK(c.rows() == m && c.cols() == n, op, ": C is ", c.rows(), "x", c.cols(), " but the product is ", m,
                "x", n);
}

// A panel the root sends from its own block and the others receive into `scratch`.
template <class T>
TensorView<T> panel(bool root, const DistMatrix<T>& own, Tensor<T>& scratch) {
  // The root's block is only read by a broadcast; the cast lets it be the send buffer.
  return root ? TensorView<T>(const_cast<T*>(own.local().data()), own.local().shape()) : scratch.view();
}

// Panels, partial products and reduced sums are overwritten before they are read: no zeroing.
MemoryTag scratch_tag(const detail::GridState& g) { return {g.memory.get(), MemoryKind::workspace}; }

}  // namespace

template <class T>
void summa_ab(T alpha, const DistMatrix<T>& a, const DistMatrix<T>& b, T beta, DistMatrix<T>& c) {
  check_operands("summa_ab", a, b, c, a.rows(), a.cols(), b.rows(), b.cols());
  const detail::GridState& g = a.grid();
  Tensor<T> a_scratch(a.local().shape(), scratch_tag(g), Init::none);  // A[i,l]: [m/q, k/q]
  Tensor<T> b_scratch(b.local().shape(), scratch_tag(g), Init::none);  // B[l,j]: [k/q, n/q]
  for (int l = 0; l < g.q; ++l) {
    TensorView<T> a_panel = panel(g.col_index == l, a, a_scratch);
    TensorView<T> b_panel = panel(g.row_index == l, b, b_scratch);
    g.row->broadcast(a_panel.data(), count_of(a_panel), dtype_of<T>, l);
    g.col->broadcast(b_panel.data(), count_of(b_panel), dtype_of<T>, l);
    cpu::gemm<T>(Trans::no, Trans::no, alpha, a_panel, b_panel, l == 0 ? beta : T(1), c.local());
  }
}

template <class T>
void summa_abt(T alpha, const DistMatrix<T>& a, const DistMatrix<T>& b, T beta, DistMatrix<T>& c) {
  check_operands("summa_abt", a, b, c, a.rows(), a.cols(), b.cols(), b.rows());
  const detail::GridState& g = a.grid();
  Tensor<T> b_scratch(b.local().shape(), scratch_tag(g), Init::none);  // B[l,j]: [n/q, k/q]
  Tensor<T> partial(c.local().shape(), scratch_tag(g), Init::none);    // T = A[i,j] B[l,j]^T: [m/q, n/q]
  Tensor<T> sum(c.local().shape(), scratch_tag(g), Init::none);        // at column l: C[i,l]'s new term
  for (int l = 0; l < g.q; ++l) {
    TensorView<T> b_panel = panel(g.row_index == l, b, b_scratch);
    g.col->broadcast(b_panel.data(), count_of(b_panel), dtype_of<T>, l);
    cpu::gemm<T>(Trans::no, Trans::yes, T(1), a.local(), b_panel, T(0), partial.view());
    g.row->reduce(partial.data(), sum.data(), count_of(partial.view()), dtype_of<T>, ReduceOp::sum, l);
    if (g.col_index == l) cpu::axpby<T>(alpha, sum.view(), beta, c.local());
  }
}

template <class T>
void summa_atb(T alpha, const DistMatrix<T>& a, const DistMatrix<T>& b, T beta, DistMatrix<T>& c) {
  check_operands("summa_atb", a, b, c, a.cols(), a.rows(), b.rows(), b.cols());
  const detail::GridState& g = a.grid();
  Tensor<T> a_scratch(a.local().shape(), scratch_tag(g), Init::none);  // A[i,l]: [k/q, m/q]
  Tensor<T> partial(c.local().shape(), scratch_tag(g), Init::none);    // T = A[i,l]^T B[i,j]: [m/q, n/q]
  Tensor<T> sum(c.local().shape(), scratch_tag(g), Init::none);        // at row l: C[l,j]'s new term
  for (int l = 0; l < g.q; ++l) {
    TensorView<T> a_panel = panel(g.col_index == l, a, a_scratch);
    g.row->broadcast(a_panel.data(), count_of(a_panel), dtype_of<T>, l);
    cpu::gemm<T>(Trans::yes, Trans::no, T(1), a_panel, b.local(), T(0), partial.view());
    g.col->reduce(partial.data(), sum.data(), count_of(partial.view()), dtype_of<T>, ReduceOp::sum, l);
    if (g.row_index == l) cpu::axpby<T>(alpha, sum.view(), beta, c.local());
  }
}

template <class T>
DistMatrix<T> summa_ab(const DistMatrix<T>& a, const DistMatrix<T>& b) {
  DistMatrix<T> c(a.grid(), a.rows(), b.cols());
  summa_ab(T(1), a, b, T(0), c);
  return c;
}

template <class T>
DistMatrix<T> summa_abt(const DistMatrix<T>& a, const DistMatrix<T>& b) {
  DistMatrix<T> c(a.grid(), a.rows(), b.rows());
  summa_abt(T(1), a, b, T(0), c);
  return c;
}

template <class T>
DistMatrix<T> summa_atb(const DistMatrix<T>& a, const DistMatrix<T>& b) {
  DistMatrix<T> c(a.grid(), a.cols(), b.cols());
  summa_atb(T(1), a, b, T(0), c);
  return c;
}

#define OPTIMUS_INSTANTIATE(T)                                                                     \
  template void summa_ab<T>(T, const DistMatrix<T>&, const DistMatrix<T>&, T, DistMatrix<T>&);   \
  template void summa_abt<T>(T, const DistMatrix<T>&, const DistMatrix<T>&, T, DistMatrix<T>&);  \
  template void summa_atb<T>(T, const DistMatrix<T>&, const DistMatrix<T>&, T, DistMatrix<T>&);  \
  template DistMatrix<T> summa_ab<T>(const DistMatrix<T>&, const DistMatrix<T>&);                \
  template DistMatrix<T> summa_abt<T>(const DistMatrix<T>&, const DistMatrix<T>&);               \
  template DistMatrix<T> summa_atb<T>(const DistMatrix<T>&, const DistMatrix<T>&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus

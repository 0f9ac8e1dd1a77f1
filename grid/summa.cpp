// The three SUMMA products on the q x q grid (see summa.hpp for what each computes and moves).
#include "optimus/grid/summa.hpp"

#include <array>
#include <utility>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/ops.hpp"

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
  const TensorView<const T> mine = own.local();
  return root ? TensorView<T>(const_cast<T*>(mine.data()), mine.shape(), mine.device()) : scratch.view();
}

// The local GEMM C = alpha op(A) op(B) + beta C in row tiles of C, calling poll() between tiles so that
// non-blocking MPI operations progress while the GEMM runs (MPI progresses only inside MPI calls). Both
// SUMMA modes use the same tiles, so their results stay bitwise identical.
template <class T, class Poll>
void tiled_gemm(const ops::Queue& queue, Trans trans_a, Trans trans_b, T alpha, TensorView<const T> a,
                TensorView<const T> b, T beta, TensorView<T> c, Poll&& poll) {
  constexpr std::int64_t kTiles = 4, kMinRows = 64;
  const std::int64_t rows = c.size(0);
  // On a GPU the GEMM is asynchronous and communication progresses on its own: one tile.
  const std::int64_t tiles = rows >= kTiles * kMinRows && c.device() == Device::cpu ? kTiles : 1;
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t r0 = rows * t / tiles, r1 = rows * (t + 1) / tiles;
    const TensorView<const T> a_rows =
        trans_a == Trans::no ? a.block(r0, 0, r1 - r0, a.size(1)) : a.block(0, r0, a.size(0), r1 - r0);
    ops::gemm<T>(trans_a == Trans::yes, trans_b == Trans::yes, alpha, a_rows, b, beta,
                 c.block(r0, 0, r1 - r0, c.size(1)), queue);
    if (t + 1 < tiles) poll();
  }
}

// Polls requests (MPI_Test) so that they progress; completed ones become empty.
template <std::size_t N>
void poll_all(std::array<Request*, N> requests) {
  for (Request* r : requests) {
    if (r != nullptr) r->test();
  }
}

// Panels, partial products and reduced sums are overwritten before they are read: no zeroing.
MemoryTag scratch_tag(const detail::GridState& g) { return g.tag(MemoryKind::workspace); }

}  // namespace

// Both modes run the same sequence of GEMMs and the same MPI reductions (non-blocking ones, waited on at
// once when not overlapped), so their results are bitwise identical. Overlapped, the panel broadcasts of step
// l+1 (double-buffered) and the reduction of step l's partial product are in flight while step l+1 multiplies.

template <class T>
void summa_ab(T alpha, const DistMatrix<T>& a, const DistMatrix<T>& b, T beta, DistMatrix<T>& c) {
  check_operands("summa_ab", a, b, c, a.rows(), a.cols(), b.rows(), b.cols());
  const detail::GridState& g = a.grid();
  const int buffers = g.overlap && g.q > 1 ? 2 : 1;
  std::vector<Tensor<T>> a_scratch, b_scratch;  // A[i,l]: [m/q, k/q], B[l,j]: [k/q, n/q]
  for (int k = 0; k < buffers; ++k) {
    a_scratch.emplace_back(a.local().shape(), scratch_tag(g), Init::none);
    b_scratch.emplace_back(b.local().shape(), scratch_tag(g), Init::none);
  }
  auto panels = [&](int l) {
    return std::pair{panel(g.col_index == l, a, a_scratch[static_cast<std::size_t>(l % buffers)]),
                     panel(g.row_index == l, b, b_scratch[static_cast<std::size_t>(l % buffers)])};
  };
  auto post = [&](int l) {
    const auto [ap, bp] = panels(l);
    return std::array<Request, 2>{g.row->ibroadcast(ap.data(), count_of(ap), dtype_of<T>, l),
                                  g.col->ibroadcast(bp.data(), count_of(bp), dtype_of<T>, l)};
  };
  std::array<Request, 2> inflight;
  if (g.overlap) inflight = post(0);
  for (int l = 0; l < g.q; ++l) {
    if (g.overlap) {
      {
        const Timeline::Scope wait(g.timeline, SpanKind::comm_wait);
        for (Request& r : inflight) r.wait();
      }
      if (l + 1 < g.q) inflight = post(l + 1);
    } else {
      const Timeline::Scope wait(g.timeline, SpanKind::comm_wait);
      const auto [ap, bp] = panels(l);
      g.row->broadcast(ap.data(), count_of(ap), dtype_of<T>, l);
      g.col->broadcast(bp.data(), count_of(bp), dtype_of<T>, l);
    }
    const auto [ap, bp] = panels(l);
    const Timeline::Scope compute(g.timeline, SpanKind::compute);
    tiled_gemm<T>(g.queue, Trans::no, Trans::no, alpha, ap, bp, l == 0 ? beta : T(1), c.local(),
                  [&] { poll_all<2>({&inflight[0], &inflight[1]}); });
  }
}

// The reduce-based products (ABT, ATB): step l broadcasts a panel of `mover` along `bcast` (from the rank
// whose coordinate there is l), multiplies it into a partial product, and reduces the partial along `reduce`
// to the rank whose coordinate there is l. `product(panel, partial)` computes the partial product. Returns with
// the last reductions in flight (overlapped) or done (blocking); PendingProduct::finish() writes C.
template <class T, class Product>
PendingProduct<T> summa_reduced(const detail::GridState& g, const DistMatrix<T>& mover, Communicator& bcast,
                                Communicator& reduce, T alpha, T beta, DistMatrix<T>& c, Product&& product) {
  const int buffers = g.overlap && g.q > 1 ? 2 : 1;
  std::vector<Tensor<T>> scratch, partial;
  for (int k = 0; k < buffers; ++k) {
    scratch.emplace_back(mover.local().shape(), scratch_tag(g), Init::none);
    partial.emplace_back(c.local().shape(), scratch_tag(g), Init::none);
  }
  Tensor<T> sum(c.local().shape(), scratch_tag(g), Init::none);  // this rank's reduced term (it is root once)
  const int my_bcast_coordinate = bcast.rank();
  auto panel_of = [&](int l) {
    return panel(my_bcast_coordinate == l, mover, scratch[static_cast<std::size_t>(l % buffers)]);
  };
  auto post_panel = [&](int l) {
    const TensorView<T> p = panel_of(l);
    return bcast.ibroadcast(p.data(), count_of(p), dtype_of<T>, l);
  };
  std::vector<Request> reductions(static_cast<std::size_t>(buffers));
  Request inflight;
  if (g.overlap) inflight = post_panel(0);
  for (int l = 0; l < g.q; ++l) {
    const TensorView<T> p = panel_of(l);
    Request& previous = reductions[static_cast<std::size_t>(l % buffers)];
    {
      const Timeline::Scope wait(g.timeline, SpanKind::comm_wait);
      if (g.overlap) {
        inflight.wait();
      } else {
        bcast.broadcast(p.data(), count_of(p), dtype_of<T>, l);
      }
      previous.wait();  // its partial buffer is free again
    }
    if (g.overlap && l + 1 < g.q) inflight = post_panel(l + 1);
    Tensor<T>& part = partial[static_cast<std::size_t>(l % buffers)];
    {
      const Timeline::Scope compute(g.timeline, SpanKind::compute);
      Request& other = reductions[static_cast<std::size_t>((l + 1) % buffers)];
      product(TensorView<const T>(p), part.view(), [&] { poll_all<2>({&inflight, buffers > 1 ? &other : nullptr}); });
    }
    previous = reduce.ireduce(part.data(), sum.data(), count_of(part.view()), dtype_of<T>, ReduceOp::sum, l);
    if (!g.overlap) {
      const Timeline::Scope wait(g.timeline, SpanKind::comm_wait);
      previous.wait();
    }
  }
  // The partial buffers may still be being sent: they live as long as the pending reductions.
  return PendingProduct<T>(g, alpha, beta, c, std::move(sum), std::move(partial), std::move(reductions));
}

template <class T>
PendingProduct<T>::PendingProduct(const detail::GridState& grid, T alpha, T beta, DistMatrix<T>& c, Tensor<T> sum,
                                  std::vector<Tensor<T>> sent, std::vector<Request> reductions)
    : grid_(&grid),
      alpha_(alpha),
      beta_(beta),
      c_(&c),
      sum_(std::move(sum)),
      sent_(std::move(sent)),
      reductions_(std::move(reductions)) {}

template <class T>
void PendingProduct<T>::finish() {
  OPTIMUS_CHECK(c_ != nullptr, "PendingProduct::finish called twice");
  {
    const Timeline::Scope wait(grid_->timeline, SpanKind::comm_wait);
    for (Request& r : reductions_) r.wait();
  }
  // Every rank was the root of exactly one reduction: `sum` holds its block's new term.
  ops::axpby<T>(alpha_, sum_.view(), beta_, c_->local(), grid_->queue);
  c_ = nullptr;
  reductions_.clear();
  sent_.clear();
  sum_ = Tensor<T>();
}

template <class T>
PendingProduct<T>::~PendingProduct() {
  if (c_ == nullptr) return;
  try {
    finish();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; finish() reports errors
  }
}

template <class T>
PendingProduct<T> summa_abt_async(T alpha, const DistMatrix<T>& a, const DistMatrix<T>& b, T beta, DistMatrix<T>& c) {
  check_operands("summa_abt", a, b, c, a.rows(), a.cols(), b.cols(), b.rows());
  const detail::GridState& g = a.grid();
  // B[l,j]: [n/q, k/q] along column j; T = A[i,j] B[l,j]^T: [m/q, n/q] reduced along row i to C[i,l].
  return summa_reduced<T>(g, b, *g.col, *g.row, alpha, beta, c,
                          [&](TensorView<const T> b_panel, TensorView<T> partial, auto&& poll) {
                            tiled_gemm<T>(g.queue, Trans::no, Trans::yes, T(1), a.local(), b_panel, T(0), partial,
                                          poll);
                          });
}

template <class T>
PendingProduct<T> summa_atb_async(T alpha, const DistMatrix<T>& a, const DistMatrix<T>& b, T beta, DistMatrix<T>& c) {
  check_operands("summa_atb", a, b, c, a.cols(), a.rows(), b.rows(), b.cols());
  const detail::GridState& g = a.grid();
  // A[i,l]: [k/q, m/q] along row i; T = A[i,l]^T B[i,j]: [m/q, n/q] reduced along column j to C[l,j].
  return summa_reduced<T>(g, a, *g.row, *g.col, alpha, beta, c,
                          [&](TensorView<const T> a_panel, TensorView<T> partial, auto&& poll) {
                            tiled_gemm<T>(g.queue, Trans::yes, Trans::no, T(1), a_panel, b.local(), T(0), partial,
                                          poll);
                          });
}

template <class T>
void summa_abt(T alpha, const DistMatrix<T>& a, const DistMatrix<T>& b, T beta, DistMatrix<T>& c) {
  summa_abt_async(alpha, a, b, beta, c).finish();
}

template <class T>
void summa_atb(T alpha, const DistMatrix<T>& a, const DistMatrix<T>& b, T beta, DistMatrix<T>& c) {
  summa_atb_async(alpha, a, b, beta, c).finish();
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
  template class PendingProduct<T>;                                                                \
  template PendingProduct<T> summa_abt_async<T>(T, const DistMatrix<T>&, const DistMatrix<T>&, T, DistMatrix<T>&); \
  template PendingProduct<T> summa_atb_async<T>(T, const DistMatrix<T>&, const DistMatrix<T>&, T, DistMatrix<T>&); \
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

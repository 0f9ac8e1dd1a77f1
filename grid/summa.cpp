// The three SUMMA products on the q x q grid (see summa.hpp for what each computes and moves).
#include "optimus/grid/summa.hpp"

#include <array>
#include <type_traits>
#include <utility>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {
namespace {

template <class T>
std::size_t count_of(const TensorView<T>& v) {
  return static_cast<std::size_t>(v.numel());
}

// Shape and grid checks shared by the three products. `op` names the product for the message;
// (m, k) and (kb, n) are op(A)'s and op(B)'s global shapes.
template <class T>
void check_operands(const char* op, const SummaOperand<T>& a, const SummaOperand<T>& b, const DistMatrix<T>& c,
                    std::int64_t m, std::int64_t k, std::int64_t kb, std::int64_t n) {
  OPTIMUS_CHECK(a.grid->same(*b.grid) && a.grid->same(c.grid()), op, ": the matrices belong to different grids");
  const T* out = std::as_const(c).local().data();
  OPTIMUS_CHECK(out == nullptr || (out != a.block.data() && out != b.block.data()), op,
                ": the output C must not be one of the inputs");  // (an empty C holds no data to alias)
  OPTIMUS_CHECK(k == kb, op, ": inner dimensions differ: A is ", a.rows, "x", a.cols, ", B is ", b.rows, "x", b.cols,
                " (", k, " != ", kb, ")");
  OPTIMUS_CHECK(c.rows() == m && c.cols() == n, op, ": C is ", c.rows(), "x", c.cols(), " but the product is ", m,
                "x", n);
}

// Panels, partial products and reduced sums are overwritten before they are read: no zeroing.
MemoryTag scratch_tag(const Grid& g) { return g.tag(MemoryKind::workspace); }

// What a rank multiplies and sends of one operand: its own block (S = T), or for mixed precision (T = float on a
// grid whose GEMM math is bf16, S = bf16) a bf16 copy of it, made once per product so that panels move in bf16
// (or the one a SavedActivation kept).
template <class S>
struct Operand {
  Tensor<S> copy;             // the bf16 copy; empty when S is the matrix's own type
  TensorView<const S> block;  // [rows/q, cols/q]
};

template <class S, class T>
Operand<S> operand(const Grid& g, const SummaOperand<T>& m) {
  if constexpr (std::is_same_v<S, T>) {
    OPTIMUS_CHECK(!m.is_bf16, "summa: an operand was saved in bf16 (on a grid handle computing in bf16) but this "
                              "product does not compute in bf16 (its first operand's handle); save and use operands on "
                              "handles that execute alike");
    return {Tensor<S>(), m.block};
  } else {
    if (m.is_bf16) return {Tensor<S>(), m.bf16_block};
    Tensor<S> copy(m.block.shape(), scratch_tag(g), Init::none);
    ops::to_bf16(m.block, copy.view(), g.queue());
    const TensorView<const S> block = std::as_const(copy).view();
    return {std::move(copy), block};  // moving a tensor keeps its storage: `block` stays valid
  }
}

// A panel the root sends from its own block and the others receive into `scratch`.
template <class S>
TensorView<S> panel(bool root, const Operand<S>& own, Tensor<S>& scratch) {
  // The root's block is only read by a broadcast; the cast lets it be the send buffer.
  const TensorView<const S> mine = own.block;
  return root ? TensorView<S>(const_cast<S*>(mine.data()), mine.shape(), mine.device()) : scratch.view();
}

// The local GEMM C = alpha op(A) op(B) + beta C in row tiles of C, calling poll() between tiles so that
// non-blocking MPI operations progress while the GEMM runs (MPI progresses only inside MPI calls). Both
// SUMMA modes use the same tiles, so their results stay bitwise identical. One tile, the GEMM backend's whole
// product, wherever nothing needs polling (`polling` false): at q = 1 (nothing in flight), on in-process ranks (their
// operations advance by themselves), on a GPU (its GEMM is asynchronous and NCCL progresses on its own). Tiles cost
// OpenBLAS a packing of op(B) each: at q = 2, h = 512 on two cores four tiles spent 18% of the CPU time packing
// against 9% for one (bench/README.md). The simulated device tiles as the CPU does on the same launch
// (Communicator::needs_progress_calls), since it runs the CPU's GEMM and gives the CPU's bits.
// S: the operands' type (T, or bf16 with T = float: ops::gemm's mixed-precision overload).
// `epilogue` (ops::Epilogue) is applied to each tile of C as its GEMM writes it.
template <class T, class S, class Poll>
void tiled_gemm(const ops::Queue& queue, bool polling, Trans trans_a, Trans trans_b, T alpha,
                TensorView<const S> a, TensorView<const S> b, T beta, TensorView<T> c, Poll&& poll,
                const ops::Epilogue<T>& epilogue = {}) {
  constexpr std::int64_t kTiles = 4, kMinRows = 64;
  const std::int64_t rows = c.size(0);
  const std::int64_t tiles = polling && rows >= kTiles * kMinRows && c.device() != Device::cuda ? kTiles : 1;
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t r0 = rows * t / tiles, r1 = rows * (t + 1) / tiles;
    const TensorView<const S> a_rows =
        trans_a == Trans::no ? a.block(r0, 0, r1 - r0, a.size(1)) : a.block(0, r0, a.size(0), r1 - r0);
    ops::gemm(trans_a, trans_b, alpha, a_rows, b, beta, c.block(r0, 0, r1 - r0, c.size(1)), epilogue.rows(r0, r1 - r0),
              queue);
    if (t + 1 < tiles) poll();
  }
}

// Whether SUMMA's GEMMs poll the communication in flight (tiled_gemm).
bool polls_while_computing(const Grid& g) { return g.q() > 1 && g.grid().needs_progress_calls(); }

// The panel broadcasts of one SUMMA step as views (Communicator::ibroadcast_view).
template <std::size_t N>
struct PanelViews {
  std::array<BroadcastView, N> view;

  void wait() {
    for (BroadcastView& v : view) v.wait();
  }
  // Panel k, shaped like this rank's block of its matrix (every block of an operand has one shape).
  template <class S>
  TensorView<const S> values(std::size_t k, const TensorView<const S>& like) const {
    return TensorView<const S>(static_cast<const S*>(view[k].data()), like.shape(), like.device());
  }
  void release() {
    for (BroadcastView& v : view) v.release();
  }
  void reclaim() {
    for (BroadcastView& v : view) v.reclaim();
  }
};

// Polls every view still in flight (MPI_Test) so that it progresses.
template <std::size_t N>
void poll_views(std::vector<PanelViews<N>>& views) {
  for (PanelViews<N>& step : views) {
    for (BroadcastView& v : step.view) v.test();
  }
}

// Runs with.template operator()<S>() with the operand type of T-products on grid g (see Operand): S = bf16 for f32
// products on a grid whose GEMM math is bf16, S = T otherwise.
template <class T, class With>
decltype(auto) with_operand_type(const Grid& g, With&& with) {
  if constexpr (std::is_same_v<T, float>) {
    if (g.queue().math == ops::GemmMath::bf16) return with.template operator()<bf16>();
  }
  return with.template operator()<T>();
}

}  // namespace

// Both modes run the same sequence of GEMMs and the same MPI reductions (non-blocking ones, waited on at
// once when not overlapped), so their results are bitwise identical. Overlapped, the panel broadcasts of step
// l+1 (double-buffered) and the reduction of step l's partial product are in flight while step l+1 multiplies.

// AB with operands of type S (see Operand).
template <class S, class T>
void summa_ab_with(T alpha, const SummaOperand<T>& a_matrix, const SummaOperand<T>& b_matrix, T beta, DistMatrix<T>& c,
                   const ops::Epilogue<T>& epilogue) {
  const Grid& g = *a_matrix.grid;
  const Operand<S> a = operand<S>(g, a_matrix), b = operand<S>(g, b_matrix);
  if (g.q() == 1) {  // nothing moves: the one GEMM, with no scratch panels
    const Timeline::Scope compute(g.timeline(), SpanKind::compute);
    tiled_gemm<T, S>(g.queue(), false, Trans::no, Trans::no, alpha, a.block, b.block, beta, c.local(), [] {},
                     epilogue);
    return;
  }
  const int buffers = g.overlap() ? 2 : 1;
  std::vector<Tensor<S>> a_scratch, b_scratch;  // A[i,l]: [m/q, k/q], B[l,j]: [k/q, n/q]
  for (int k = 0; k < buffers; ++k) {
    a_scratch.emplace_back(a.block.shape(), scratch_tag(g), Init::none);
    b_scratch.emplace_back(b.block.shape(), scratch_tag(g), Init::none);
  }
  auto panels = [&](int l) {
    return std::pair{panel(g.col_index() == l, a, a_scratch[static_cast<std::size_t>(l % buffers)]),
                     panel(g.row_index() == l, b, b_scratch[static_cast<std::size_t>(l % buffers)])};
  };
  auto multiply = [&](int l, TensorView<const S> ap, TensorView<const S> bp, auto&& poll) {
    const Timeline::Scope compute(g.timeline(), SpanKind::compute);
    tiled_gemm<T, S>(g.queue(), polls_while_computing(g), Trans::no, Trans::no, alpha, ap, bp, l == 0 ? beta : T(1),
                     c.local(), poll, l + 1 == g.q() ? epilogue : ops::Epilogue<T>{});  // the epilogue with the last GEMM
  };
  if (!g.overlap()) {
    for (int l = 0; l < g.q(); ++l) {
      const auto [ap, bp] = panels(l);
      {
        const Timeline::Scope wait(g.timeline(), SpanKind::comm_wait);
        g.row().broadcast(ap.data(), count_of(ap), dtype_of<S>, l);
        g.col().broadcast(bp.data(), count_of(bp), dtype_of<S>, l);
      }
      multiply(l, ap, bp, [] {});
    }
    return;
  }
  // Overlapped: step l + 1's panels are posted before step l multiplies. Each panel is a view (Communicator::
  // ibroadcast_view): a receiver multiplies the root's block where the backend lets it read it in place (in-process on
  // host memory), its scratch buffer otherwise, and releases it after its GEMM. A root's block is its operand's, alive
  // and unchanged to the end: it reclaims it there.
  std::vector<PanelViews<2>> views(static_cast<std::size_t>(g.q()));
  auto post = [&](int l) {
    const auto [ap, bp] = panels(l);
    views[static_cast<std::size_t>(l)] =
        PanelViews<2>{.view = {g.row().ibroadcast_view(ap.data(), count_of(ap), dtype_of<S>, l),
                               g.col().ibroadcast_view(bp.data(), count_of(bp), dtype_of<S>, l)}};
  };
  post(0);
  for (int l = 0; l < g.q(); ++l) {
    PanelViews<2>& now = views[static_cast<std::size_t>(l)];
    {
      const Timeline::Scope wait(g.timeline(), SpanKind::comm_wait);
      now.wait();
    }
    if (l + 1 < g.q()) post(l + 1);
    multiply(l, now.values<S>(0, a.block), now.values<S>(1, b.block), [&] { poll_views(views); });
    now.release();
  }
  const Timeline::Scope wait(g.timeline(), SpanKind::comm_wait);
  for (PanelViews<2>& v : views) v.reclaim();
}

template <class T>
void summa_ab(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c, const ops::Epilogue<T>& epilogue) {
  check_operands("summa_ab", a, b, c, a.rows, a.cols, b.rows, b.cols);
  epilogue.check_fits("summa_ab", std::as_const(c).local().shape());  // before any communication
  with_operand_type<T>(*a.grid, [&]<class S>() { summa_ab_with<S>(alpha, a, b, beta, c, epilogue); });
}

template <class T>
void summa_ab(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c) {
  summa_ab(alpha, a, b, beta, c, ops::Epilogue<T>{});
}

// The reduce-based products (ABT, ATB): step l broadcasts a panel of `mover` along `bcast` (from the rank
// whose coordinate there is l), multiplies it into a partial product, and reduces the partial along `reduce`
// to the rank whose coordinate there is l. `product(panel, alpha, beta, out, poll)` computes out = alpha times the
// panel's product + beta out. Returns with the last reductions in flight (overlapped) or done (blocking);
// PendingProduct::finish() writes C. At q = 1 there is nothing to move: the one GEMM writes C with alpha and beta,
// and the product returns finished (no partial buffer, no copy into the reduced sum, no axpby).
// The panels are of type S (see Operand); the partial products and their reductions stay in T.
template <class S, class T, class Product>
PendingProduct<T> summa_reduced(const Grid& g, const Operand<S>& mover, Communicator& bcast,
                                Communicator& reduce, T alpha, T beta, DistMatrix<T>& c, Product&& product) {
  if (g.q() == 1) {  // nothing moves: the one GEMM writes C, with no scratch panel or partial product
    const Timeline::Scope compute(g.timeline(), SpanKind::compute);
    product(mover.block, alpha, beta, c.local(), [] {});
    return PendingProduct<T>(g);
  }
  const int buffers = g.overlap() ? 2 : 1;
  std::vector<Tensor<S>> scratch;
  std::vector<Tensor<T>> partial;
  for (int k = 0; k < buffers; ++k) {
    scratch.emplace_back(mover.block.shape(), scratch_tag(g), Init::none);
    partial.emplace_back(c.local().shape(), scratch_tag(g), Init::none);
  }
  Tensor<T> sum(c.local().shape(), scratch_tag(g), Init::none);  // this rank's reduced term (it is root once)
  const int my_bcast_coordinate = bcast.rank();
  auto panel_of = [&](int l) {
    return panel(my_bcast_coordinate == l, mover, scratch[static_cast<std::size_t>(l % buffers)]);
  };
  // Overlapped, the panels are views as in summa_ab_with: read in place where the backend can, released after the
  // GEMM; this rank's own panel is reclaimed at the end, before its block (perhaps a bf16 copy) may go.
  std::vector<PanelViews<1>> views(static_cast<std::size_t>(g.overlap() ? g.q() : 0));
  auto post_panel = [&](int l) {
    const TensorView<S> p = panel_of(l);
    views[static_cast<std::size_t>(l)] =
        PanelViews<1>{.view = {bcast.ibroadcast_view(p.data(), count_of(p), dtype_of<S>, l)}};
  };
  std::vector<Request> reductions(static_cast<std::size_t>(buffers));
  if (g.overlap()) post_panel(0);
  for (int l = 0; l < g.q(); ++l) {
    const TensorView<S> mine = panel_of(l);  // the root's block, or this rank's scratch buffer
    TensorView<const S> p(mine);              // what the GEMM multiplies
    Request& previous = reductions[static_cast<std::size_t>(l % buffers)];
    {
      const Timeline::Scope wait(g.timeline(), SpanKind::comm_wait);
      if (g.overlap()) {
        views[static_cast<std::size_t>(l)].wait();
        p = views[static_cast<std::size_t>(l)].template values<S>(0, mover.block);
      } else {
        bcast.broadcast(mine.data(), count_of(mine), dtype_of<S>, l);
      }
      previous.wait();  // its partial buffer is free again
    }
    if (g.overlap() && l + 1 < g.q()) post_panel(l + 1);
    Tensor<T>& part = partial[static_cast<std::size_t>(l % buffers)];
    {
      const Timeline::Scope compute(g.timeline(), SpanKind::compute);
      Request& other = reductions[static_cast<std::size_t>((l + 1) % buffers)];
      product(p, T(1), T(0), part.view(), [&] {
        poll_views(views);
        if (buffers > 1) other.test();
      });
    }
    if (g.overlap()) views[static_cast<std::size_t>(l)].release();
    previous = reduce.ireduce(part.data(), sum.data(), count_of(part.view()), dtype_of<T>, ReduceOp::sum, l);
    if (!g.overlap()) {
      const Timeline::Scope wait(g.timeline(), SpanKind::comm_wait);
      previous.wait();
    }
  }
  {
    const Timeline::Scope wait(g.timeline(), SpanKind::comm_wait);
    for (PanelViews<1>& v : views) v.reclaim();
  }
  // The partial buffers may still be being sent: they live as long as the pending reductions.
  return PendingProduct<T>(g, alpha, beta, c, std::move(sum), std::move(partial), std::move(reductions));
}

template <class T>
PendingProduct<T>::PendingProduct(const Grid& grid) : grid_(grid), alpha_(0), beta_(0), c_(nullptr) {}

template <class T>
PendingProduct<T>::PendingProduct(const Grid& grid, T alpha, T beta, DistMatrix<T>& c, Tensor<T> sum,
                                  std::vector<Tensor<T>> sent, std::vector<Request> reductions)
    : grid_(grid),
      alpha_(alpha),
      beta_(beta),
      c_(&c),
      sum_(std::move(sum)),
      sent_(std::move(sent)),
      reductions_(std::move(reductions)) {}

template <class T>
void PendingProduct<T>::finish() {
  if (c_ == nullptr) return;  // finished already (or at q = 1, born finished)
  {
    const Timeline::Scope wait(grid_.timeline(), SpanKind::comm_wait);
    for (Request& r : reductions_) r.wait();
  }
  // Every rank was the root of exactly one reduction: `sum` holds its block's new term.
  ops::axpby<T>(alpha_, sum_.view(), beta_, c_->local(), grid_.queue());
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

// ABT and ATB with operands of type S (see Operand).
template <class S, class T>
PendingProduct<T> summa_abt_with(T alpha, const SummaOperand<T>& a_matrix, const SummaOperand<T>& b_matrix, T beta,
                                 DistMatrix<T>& c) {
  const Grid& g = *a_matrix.grid;
  const Operand<S> a = operand<S>(g, a_matrix), b = operand<S>(g, b_matrix);
  // B[l,j]: [n/q, k/q] along column j; T = A[i,j] B[l,j]^T: [m/q, n/q] reduced along row i to C[i,l].
  return summa_reduced<S, T>(g, b, g.col(), g.row(), alpha, beta, c,
                             [&](TensorView<const S> b_panel, T scale, T keep, TensorView<T> out, auto&& poll) {
                               tiled_gemm<T, S>(g.queue(), polls_while_computing(g), Trans::no, Trans::yes, scale,
                                                a.block, b_panel, keep, out, poll);
                             });
}

template <class S, class T>
PendingProduct<T> summa_atb_with(T alpha, const SummaOperand<T>& a_matrix, const SummaOperand<T>& b_matrix, T beta,
                                 DistMatrix<T>& c) {
  const Grid& g = *a_matrix.grid;
  const Operand<S> a = operand<S>(g, a_matrix), b = operand<S>(g, b_matrix);
  // A[i,l]: [k/q, m/q] along row i; T = A[i,l]^T B[i,j]: [m/q, n/q] reduced along column j to C[l,j].
  return summa_reduced<S, T>(g, a, g.row(), g.col(), alpha, beta, c,
                             [&](TensorView<const S> a_panel, T scale, T keep, TensorView<T> out, auto&& poll) {
                               tiled_gemm<T, S>(g.queue(), polls_while_computing(g), Trans::yes, Trans::no, scale,
                                                a_panel, b.block, keep, out, poll);
                             });
}

template <class T>
PendingProduct<T> summa_abt_async(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c) {
  check_operands("summa_abt", a, b, c, a.rows, a.cols, b.cols, b.rows);
  return with_operand_type<T>(*a.grid, [&]<class S>() { return summa_abt_with<S>(alpha, a, b, beta, c); });
}

template <class T>
PendingProduct<T> summa_atb_async(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c) {
  check_operands("summa_atb", a, b, c, a.cols, a.rows, b.rows, b.cols);
  return with_operand_type<T>(*a.grid, [&]<class S>() { return summa_atb_with<S>(alpha, a, b, beta, c); });
}

template <class T>
void summa_abt(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c) {
  summa_abt_async(alpha, a, b, beta, c).finish();
}

template <class T>
void summa_atb(T alpha, OperandIn<T> a, OperandIn<T> b, T beta, DistMatrix<T>& c) {
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

template <class T>
TensorView<const T> operand_values(const SummaOperand<T>& m, Tensor<T>& scratch) {
  if constexpr (std::is_same_v<T, float>) {
    if (m.is_bf16) {
      scratch = Tensor<T>(m.bf16_block.shape(), m.grid->tag(MemoryKind::workspace), Init::none);
      ops::to_f32(m.bf16_block, scratch.view(), m.grid->queue());
      return std::as_const(scratch).view();
    }
  }
  return m.block;
}

#define OPTIMUS_INSTANTIATE(T)                                                                     \
  template class PendingProduct<T>;                                                                \
  template PendingProduct<T> summa_abt_async<T>(T, OperandIn<T>, OperandIn<T>, T, DistMatrix<T>&); \
  template PendingProduct<T> summa_atb_async<T>(T, OperandIn<T>, OperandIn<T>, T, DistMatrix<T>&); \
  template void summa_ab<T>(T, OperandIn<T>, OperandIn<T>, T, DistMatrix<T>&);   \
  template void summa_ab<T>(T, OperandIn<T>, OperandIn<T>, T, DistMatrix<T>&, const ops::Epilogue<T>&); \
  template void summa_abt<T>(T, OperandIn<T>, OperandIn<T>, T, DistMatrix<T>&);  \
  template void summa_atb<T>(T, OperandIn<T>, OperandIn<T>, T, DistMatrix<T>&);  \
  template DistMatrix<T> summa_ab<T>(const DistMatrix<T>&, const DistMatrix<T>&);                \
  template DistMatrix<T> summa_abt<T>(const DistMatrix<T>&, const DistMatrix<T>&);               \
  template DistMatrix<T> summa_atb<T>(const DistMatrix<T>&, const DistMatrix<T>&);               \
  template TensorView<const T> operand_values<T>(const SummaOperand<T>&, Tensor<T>&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus

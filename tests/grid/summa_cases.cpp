// Grid, DistMatrix and SUMMA checks shared by the MPI and in-process suites.
#include "summa_cases.hpp"

#include "polling_communicator.hpp"
#include "same_error.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>

#include "optimus/core/dtype.hpp"
#include "optimus/core/error.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/reference/matmul.hpp"

namespace optimus::test {
namespace {

using reference::Matrix;

template <class T>
using Global = typename DistMatrix<T>::Matrix;


enum class Product { ab, abt, atb };

const char* name_of(Product p) { return p == Product::ab ? "ab" : p == Product::abt ? "abt" : "atb"; }

// The values bf16 operands hold: each element rounded to bf16 (nearest even).
Matrix round_to_bf16(const Matrix& x) {
  return x.unaryExpr([](double v) { return static_cast<double>(static_cast<float>(bf16(static_cast<float>(v)))); });
}

// One product against Eigen, with the exact bytes it moves. `mixed`: the grid's GEMM math is bf16 (T = float), so
// A and B enter as bf16 (and move as bf16), accumulation and C stay f32.
template <class T>
void check_product(const Grid& grid, Product product, T alpha, T beta, bool mixed = false) {
  const int q = grid.q();
  const std::int64_t m = 5 * q, k = 3 * q, n = 7 * q;  // m, k, n all differ
  // Global inputs, rounded to T so that the reference multiplies exactly what the grid holds.
  const Matrix a = (product == Product::atb ? reference::random_matrix(k, m, 11) : reference::random_matrix(m, k, 11))
                       .cast<T>()
                       .template cast<double>();
  const Matrix b = (product == Product::abt ? reference::random_matrix(n, k, 12) : reference::random_matrix(k, n, 12))
                       .cast<T>()
                       .template cast<double>();
  const Matrix c0 = reference::random_matrix(m, n, 13).cast<T>().template cast<double>();
  // What the GEMMs multiply: the inputs themselves, or their bf16 roundings.
  const Matrix a_op = mixed ? round_to_bf16(a) : a, b_op = mixed ? round_to_bf16(b) : b;

  auto A = DistMatrix<T>::from_global(grid, a);
  auto B = DistMatrix<T>::from_global(grid, b);
  auto C = DistMatrix<T>::from_global(grid, c0);
  grid.row().reset_stats();
  grid.col().reset_stats();
  Matrix expected, plain;
  // Bytes of the two matrices that move: broadcast operands (bf16 when mixed) and reduced partial products (T).
  const std::uint64_t operand_bytes = mixed ? 2 : sizeof(T);
  std::uint64_t moving = 0;
  switch (product) {
    case Product::ab:
      summa_ab(alpha, A, B, beta, C);
      plain = reference::matmul(a_op, b_op);
      moving = static_cast<std::uint64_t>(m * k + k * n) * operand_bytes;
      break;
    case Product::abt:
      summa_abt(alpha, A, B, beta, C);
      plain = reference::matmul_abt(a_op, b_op);
      moving = static_cast<std::uint64_t>(n * k) * operand_bytes + static_cast<std::uint64_t>(m * n) * sizeof(T);
      break;
    case Product::atb:
      summa_atb(alpha, A, B, beta, C);
      plain = reference::matmul_atb(a_op, b_op);
      moving = static_cast<std::uint64_t>(k * m) * operand_bytes + static_cast<std::uint64_t>(m * n) * sizeof(T);
      break;
  }
  expected = double(alpha) * plain + double(beta) * c0;
  const std::uint64_t received = grid.row().stats().bytes_received + grid.col().stats().bytes_received;
  const auto qq = static_cast<std::uint64_t>(q);
  CAPTURE(name_of(product));
  CAPTURE(q);
  CAPTURE(sizeof(T));
  CAPTURE(mixed);
  CHECK(received == (qq - 1) * moving / (qq * qq));
  const Matrix got = C.to_global().template cast<double>();
  const auto cmp = reference::compare_relative(got, expected, sizeof(T) == 4 ? 1e-5 : 1e-12);
  CAPTURE(cmp);
  CHECK(cmp.ok());

  // The forms returning a new matrix compute the plain product.
  const DistMatrix<T> D = product == Product::ab    ? summa_ab(A, B)
                          : product == Product::abt ? summa_abt(A, B)
                                                    : summa_atb(A, B);
  const Matrix d = D.to_global().template cast<double>();
  CHECK(reference::compare_relative(d, plain, sizeof(T) == 4 ? 1e-5 : 1e-12).ok());
  if (mixed) {  // bf16 operands really were used: the unrounded product is more than f32 rounding away
    const Matrix exact = product == Product::ab    ? reference::matmul(a, b)
                         : product == Product::abt ? reference::matmul_abt(a, b)
                                                   : reference::matmul_atb(a, b);
    CHECK_FALSE(reference::compare_relative(d, exact, 1e-5).ok());
    CHECK(reference::compare_relative(d, exact, 2e-2).ok());
  }
}

}  // namespace

void check_grid(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  const int p = q * q;
  const int r = world.rank();
  CHECK(grid.q() == q);
  CHECK(grid.dp() == world.size() / p);
  CHECK(grid.dp_index() == r / p);
  CHECK(grid.row_index() == (r % p) / q);
  CHECK(grid.col_index() == r % q);
  CHECK(grid.row().size() == q);
  CHECK(grid.col().size() == q);
  CHECK(grid.grid().size() == p);
  CHECK(grid.dp_comm().size() == grid.dp());
  CHECK(grid.row().rank() == grid.col_index());
  CHECK(grid.col().rank() == grid.row_index());
  CHECK(grid.grid().rank() == r % p);
  CHECK(grid.dp_comm().rank() == grid.dp_index());
  // The row communicator really holds the ranks of the same row: sum their world ranks.
  double row_sum = grid.row().all_reduce(static_cast<double>(r), ReduceOp::sum);
  double expected = 0;
  for (int j = 0; j < q; ++j) expected += grid.dp_index() * p + grid.row_index() * q + j;
  CHECK(row_sum == expected);
  double col_sum = grid.col().all_reduce(static_cast<double>(r), ReduceOp::sum);
  expected = 0;
  for (int i = 0; i < q; ++i) expected += grid.dp_index() * p + i * q + grid.col_index();
  CHECK(col_sum == expected);
  // Moving a grid keeps matrices built on it valid (they share its state).
  std::optional<Grid> holder;
  Grid moved = Grid::create(world, q);
  {
    DistMatrix<double> m(moved, 2 * q, 3 * q);
    holder.emplace(std::move(moved));
    m.fill_random(3);
    CHECK(m.to_global() == reference::random_matrix(2 * q, 3 * q, 3));
    CHECK(holder->memory().current(MemoryKind::workspace) == static_cast<std::uint64_t>(6 * sizeof(double)));
  }
  CHECK(holder->memory().current_total() == 0);
}

void check_pipeline_grid(Communicator& world, int q, int pp) {
  const Grid grid = Grid::create(world, q, pp);
  const int p = q * q, r = world.rank();
  const int dp = world.size() / (pp * p);
  CHECK(grid.q() == q);
  CHECK(grid.pp() == pp);
  CHECK(grid.dp() == dp);
  CHECK(grid.dp_index() == r / (pp * p));
  CHECK(grid.stage() == (r / p) % pp);
  CHECK(grid.row_index() == (r % p) / q);
  CHECK(grid.col_index() == r % q);
  CHECK(grid.pipe().size() == pp);
  CHECK(grid.pipe().rank() == grid.stage());
  CHECK(grid.grid().size() == p);
  CHECK(grid.dp_comm().size() == dp);
  // World rank of (replica d, stage s, i, j), and the sum of the world ranks each communicator should hold.
  const auto world_rank = [&](int d, int s, int i, int j) { return ((d * pp + s) * q + i) * q + j; };
  const int d = grid.dp_index(), s = grid.stage(), i = grid.row_index(), j = grid.col_index();
  double pipe = 0, replicas = 0, stage_grid = 0, row = 0, col = 0;
  for (int t = 0; t < pp; ++t) pipe += world_rank(d, t, i, j);
  for (int e = 0; e < dp; ++e) replicas += world_rank(e, s, i, j);
  for (int a = 0; a < q; ++a) {
    row += world_rank(d, s, i, a);
    col += world_rank(d, s, a, j);
    for (int b = 0; b < q; ++b) stage_grid += world_rank(d, s, a, b);
  }
  const auto sum = [&](Communicator& c) { return c.all_reduce(static_cast<double>(r), ReduceOp::sum); };
  CHECK(sum(grid.pipe()) == pipe);
  CHECK(sum(grid.dp_comm()) == replicas);
  CHECK(sum(grid.grid()) == stage_grid);
  CHECK(sum(grid.row()) == row);
  CHECK(sum(grid.col()) == col);
  // The next stage's (i, j) is the pipe's next rank: a block sent there arrives at the same grid position.
  if (pp > 1) {
    const int next = (s + 1) % pp, previous = (s + pp - 1) % pp;
    double mine = r, received = -1;
    Request sent = grid.pipe().isend(&mine, 1, DType::f64, next, 5);
    grid.pipe().recv(&received, 1, DType::f64, previous, 5);
    sent.wait();
    CHECK(received == world_rank(d, previous, i, j));
  }
  CHECK(optimus::test::error_on_every_rank(world, [&] { Grid::create(world, q, pp + 1); }) ==
        (world.size() % ((pp + 1) * p) == 0
             ? std::string("")
             : "Grid::create: world size " + std::to_string(world.size()) + " is not dp*pp*q*q for q = " +
                   std::to_string(q) + " and pp = " + std::to_string(pp + 1) + " (pp*q*q = " +
                   std::to_string((pp + 1) * p) + "); launch a multiple of " + std::to_string((pp + 1) * p) +
                   " ranks"));
}

void check_dist_matrix(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  const Matrix full = reference::random_matrix(4 * q, 6 * q, 5);
  auto M = DistMatrix<double>::from_global(grid, full);
  CHECK(M.local_rows() == 4);
  CHECK(M.local_cols() == 6);
  CHECK(M.local_map() == full.block(4 * grid.row_index(), 6 * grid.col_index(), 4, 6));
  CHECK(M.to_global() == full);

  // Partition independence: the same seed on this grid and on a one-rank grid gives bit-identical matrices.
  std::unique_ptr<Communicator> self = world.split(world.rank(), 0);
  const Grid single = Grid::create(*self, 1);
  for (int dist = 0; dist < 2; ++dist) {
    const Distribution d = dist == 0 ? Distribution::uniform(-1, 1) : Distribution::normal(0, 0.02);
    DistMatrix<double> X(grid, 6 * q, 2 * q), Y(single, 6 * q, 2 * q);
    DistMatrix<float> Xf(grid, 6 * q, 2 * q), Yf(single, 6 * q, 2 * q);
    X.fill_random(99, d);
    Y.fill_random(99, d);
    Xf.fill_random(99, d);
    Yf.fill_random(99, d);
    const auto x = X.to_global(), y = Y.to_global();
    const auto xf = Xf.to_global(), yf = Yf.to_global();
    CHECK(std::memcmp(x.data(), y.data(), sizeof(double) * static_cast<std::size_t>(x.size())) == 0);
    CHECK(std::memcmp(xf.data(), yf.data(), sizeof(float) * static_cast<std::size_t>(xf.size())) == 0);
    CHECK(x == reference::random_matrix(6 * q, 2 * q, 99, d));
  }
}

void check_summa(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  for (Product p : {Product::ab, Product::abt, Product::atb}) {
    check_product<double>(grid, p, 1.0, 0.0);
    check_product<double>(grid, p, -1.5, 0.75);
    check_product<float>(grid, p, 1.0f, 0.0f);
    check_product<float>(grid, p, 0.5f, -2.0f);
  }
}

void check_summa_bf16(Communicator& world, int q) {
  const Grid plain = Grid::create(world, q);
  const Grid grid = plain.with({.gemm_math = ops::GemmMath::bf16});
  CHECK(grid.gemm_math() == ops::GemmMath::bf16);
  CHECK(plain.gemm_math() == ops::GemmMath::f32);  // the handle it came from keeps its own
  CHECK(grid.same(plain));
  for (Product p : {Product::ab, Product::abt, Product::atb}) {
    check_product<float>(grid, p, 1.0f, 0.0f, true);
    check_product<float>(grid, p, 0.5f, -2.0f, true);
    check_product<double>(grid, p, -1.5, 0.75);  // f64 products ignore the GEMM math
  }
}

namespace {

// Products with SavedActivations equal those on the matrices bitwise and move the same bytes; the saved copies are
// bf16 exactly when the grid's products take bf16 operands, and are counted as the kind they were saved as.
template <class T>
void check_saved_products(const Grid& base, ops::GemmMath math) {
  const Grid grid = base.with({.gemm_math = math});
  const int q = grid.q();
  const bool in_bf16 = std::is_same_v<T, float> && math == ops::GemmMath::bf16;
  DistMatrix<T> A(grid, 5 * q, 3 * q), B(grid, 3 * q, 7 * q), Bt(grid, 7 * q, 3 * q), At(grid, 3 * q, 5 * q);
  A.fill_random(21);
  B.fill_random(22);
  Bt.fill_random(23);
  At.fill_random(24);
  const std::uint64_t before = grid.memory().current(MemoryKind::activations);
  const SavedActivation<T> a(A, MemoryKind::activations), b(B, MemoryKind::activations), at(At, MemoryKind::activations);
  CAPTURE(q);
  CAPTURE(sizeof(T));
  CAPTURE(static_cast<int>(math));
  CHECK(a.is_bf16() == in_bf16);
  CHECK(a.rows() == 5 * q);
  CHECK(a.cols() == 3 * q);
  const std::uint64_t element = in_bf16 ? 2 : sizeof(T);
  CHECK(grid.memory().current(MemoryKind::activations) - before ==
        static_cast<std::uint64_t>(A.local().numel() + B.local().numel() + At.local().numel()) * element);
  // Runs `product` on the matrices, then with saved operands: the same C bit for bit, the same bytes received.
  auto same = [&](std::int64_t m, std::int64_t n, auto&& product) {
    DistMatrix<T> plain(grid, m, n), saved(grid, m, n);
    grid.row().reset_stats();
    grid.col().reset_stats();
    product(plain, false);
    const std::uint64_t bytes = grid.row().stats().bytes_received + grid.col().stats().bytes_received;
    grid.row().reset_stats();
    grid.col().reset_stats();
    product(saved, true);
    CHECK(grid.row().stats().bytes_received + grid.col().stats().bytes_received == bytes);
    CHECK(saved.local_to_host() == plain.local_to_host());
  };
  same(5 * q, 7 * q, [&](DistMatrix<T>& c, bool s) {
    if (s) summa_ab(T(1), a, b, T(0), c);
    else summa_ab(T(1), A, B, T(0), c);
  });
  same(5 * q, 7 * q, [&](DistMatrix<T>& c, bool s) {
    if (s) summa_abt(T(1), a, Bt, T(0), c);
    else summa_abt(T(1), A, Bt, T(0), c);
  });
  same(5 * q, 7 * q, [&](DistMatrix<T>& c, bool s) {
    if (s) summa_atb(T(1), at, b, T(0), c);
    else summa_atb(T(1), At, B, T(0), c);
  });
}

}  // namespace

void check_saved_operands(Communicator& world, int q) {
  const Grid plain = Grid::create(world, q);
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    check_saved_products<float>(plain, math);
    check_saved_products<double>(plain, math);
  }
  // bf16 copies are the bf16 roundings of the block.
  const Grid grid = plain.with({.gemm_math = ops::GemmMath::bf16});
  DistMatrix<float> X(grid, 2 * q, 3 * q);
  X.fill_random(25);
  const SavedActivation<float> x(X, MemoryKind::activations);
  REQUIRE(x.bf16_block().device() == Device::cpu);
  const auto host = X.local_to_host();
  REQUIRE(x.bf16_block().numel() == host.size());
  bool all_rounded = true;
  for (std::int64_t e = 0; e < host.size(); ++e) all_rounded = all_rounded && x.bf16_block().data()[e] == bf16(host.data()[e]);
  CHECK(all_rounded);
  // values(): the bf16 copy widened (exactly) to f32, in a workspace scratch.
  Tensor<float> scratch;
  const TensorView<const float> widened = x.values(scratch);
  CHECK(widened.data() == scratch.data());
  bool all_widened = true;
  for (std::int64_t r = 0; r < widened.size(0); ++r) {
    for (std::int64_t c = 0; c < widened.size(1); ++c) {
      all_widened = all_widened && widened(r, c) == static_cast<float>(bf16(host(r, c)));
    }
  }
  CHECK(all_widened);
  // From a matrix given up: cast under bf16 math (the f32 block freed), adopted without a copy otherwise when it is
  // already counted as the kind asked for, copied when it is not.
  const std::uint64_t before = grid.memory().current(MemoryKind::activations);
  DistMatrix<float> given(grid, 2 * q, 3 * q, MemoryKind::activations);
  const SavedActivation<float> cast(std::move(given), MemoryKind::activations);
  CHECK(cast.is_bf16());
  CHECK(grid.memory().current(MemoryKind::activations) - before == static_cast<std::uint64_t>(6 * 2));
  DistMatrix<float> adopted_matrix(plain, 2 * q, 3 * q, MemoryKind::activations), copied_matrix(plain, 2 * q, 3 * q);
  adopted_matrix.fill_random(26);
  const float* adopted_data = adopted_matrix.local().data();
  const auto adopted_values = adopted_matrix.local_to_host();
  const SavedActivation<float> adopted(std::move(adopted_matrix), MemoryKind::activations);
  CHECK_FALSE(adopted.is_bf16());
  CHECK(adopted.block().data() == adopted_data);
  CHECK(adopted.values(scratch).data() == adopted_data);
  const float* copied_data = copied_matrix.local().data();
  const SavedActivation<float> copied(std::move(copied_matrix), MemoryKind::activations);
  CHECK(copied.block().data() != copied_data);
  CHECK(grid.memory().current(MemoryKind::activations) - before == static_cast<std::uint64_t>(6 * 2 + 2 * 6 * 4));
  CHECK(adopted_values == Eigen::Map<const DistMatrix<float>::Matrix>(adopted.block().data(), 2, 3));
  // A copy saved in bf16 cannot serve a product that does not take bf16 operands (its first operand on an f32 handle).
  DistMatrix<float> Y(plain, q, 2 * q), Z(plain, q, 3 * q);
  const std::string msg = error_on_every_rank(grid.grid(), [&] { summa_ab(1.0f, Y, x, 0.0f, Z); });
  CHECK(msg.find("saved in bf16") != std::string::npos);
  CHECK(msg.find("does not compute in bf16") != std::string::npos);
}

namespace {

// summa_ab with a bias / bias + GELU epilogue equals the plain product followed by those operations, bitwise, at f32
// and bf16 math, wherever the grid is placed; epilogues of the wrong shape are refused on every rank.
void epilogue_case(const Grid& base) {
  const int q = base.q();
  // 256 rows per rank: where the communicator needs progress calls the CPU GEMM runs in row tiles, each with its own
  // slice of the epilogue.
  const std::int64_t m = 256 * q, k = 3 * q, n = 4 * q;
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) {
    const Grid grid = base.with({.gemm_math = math});
    const ops::Queue queue = grid.queue();
    DistMatrix<float> A(grid, m, k), B(grid, k, n), bias(grid, q, n);
    A.fill_random(31);
    B.fill_random(32);
    bias.fill_random(33);
    // This rank's columns of the bias: row 0 of its column's first block, where the grid keeps its matrices.
    const auto bias_host = bias.local_to_host();
    const Tensor<float> row = upload(bias_host.data(), Shape{1, n / q}, grid.tag(MemoryKind::workspace));
    using Kind = ops::Epilogue<float>::Kind;
    // Expected: the plain product, then the bias and GELU as separate operations.
    DistMatrix<float> expected(grid, m, n), expected_pre(grid, m, n), got(grid, m, n), pre(grid, m, n);
    summa_ab(1.0f, A, B, 0.0f, expected_pre);
    ops::add_row_broadcast<float>(row.view(), expected_pre.local(), queue);
    ops::gelu_forward<float>(std::as_const(expected_pre).local(), expected.local(), queue);
    summa_ab(1.0f, A, B, 0.0f, got, {.kind = Kind::bias_gelu, .bias = row.view(), .pre = pre.local()});
    CHECK(pre.local_to_host() == expected_pre.local_to_host());
    CHECK(got.local_to_host() == expected.local_to_host());
    summa_ab(1.0f, A, B, 0.0f, got, {.kind = Kind::bias, .bias = row.view(), .pre = {}});
    CHECK(got.local_to_host() == expected_pre.local_to_host());
    // Epilogues of the wrong shape: the same error on every rank, before anything moves.
    const TensorView<const float> short_row = row.view().block(0, 0, 1, n / q - 1);
    CHECK(error_on_every_rank(grid.grid(), [&] {
            summa_ab(1.0f, A, B, 0.0f, got, {.kind = Kind::bias, .bias = short_row, .pre = {}});
          }).find("the epilogue's bias has shape") != std::string::npos);
    const TensorView<float> short_pre = pre.local().block(0, 0, m / q - 1, n / q);
    CHECK(error_on_every_rank(grid.grid(), [&] {
            summa_ab(1.0f, A, B, 0.0f, got, {.kind = Kind::bias_gelu, .bias = row.view(), .pre = short_pre});
          }).find("GELU's input (pre) has shape") != std::string::npos);
  }
}

}  // namespace

void check_summa_epilogue(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  epilogue_case(grid);
  // Told to need progress calls, as MPI does: the GEMMs in row tiles, in every launch.
  PollingCommunicator polled(world, true);
  Grid tiled = Grid::create(polled, q);
  epilogue_case(tiled);
  CHECK((q == 1 || polled.polls() > 0));
}

void check_summa_f32_on(const Grid& grid) {
  for (Product p : {Product::ab, Product::abt, Product::atb}) {
    check_product<float>(grid, p, 1.0f, 0.0f);
    check_product<float>(grid, p, 0.5f, -2.0f);
  }
  const Grid bf16 = grid.with({.gemm_math = ops::GemmMath::bf16});
  for (Product p : {Product::ab, Product::abt, Product::atb}) check_product<float>(bf16, p, 0.5f, -2.0f, true);
  for (ops::GemmMath math : {ops::GemmMath::f32, ops::GemmMath::bf16}) check_saved_products<float>(grid, math);
  epilogue_case(grid);
}

void check_bad_input(Communicator& world, int q) {
  // A world size that is not dp*q*q.
  for (int bad_q = 2; bad_q <= 4; ++bad_q) {
    if (world.size() % (bad_q * bad_q) == 0) continue;
    const std::string msg = error_on_every_rank(world, [&] { Grid::create(world, bad_q); });
    CHECK(msg.find("world size " + std::to_string(world.size())) != std::string::npos);
    CHECK(msg.find("q = " + std::to_string(bad_q)) != std::string::npos);
  }
  CHECK(error_on_every_rank(world, [&] { Grid::create(world, 0); }).find("q = 0") != std::string::npos);

  const Grid grid = Grid::create(world, q);
  Communicator& g = grid.grid();
  if (q > 1) {
    const std::string msg = error_on_every_rank(g, [&] { DistMatrix<double>(grid, 2 * q + 1, q); });
    CHECK(msg == "DistMatrix: rows = " + std::to_string(2 * q + 1) + " is not divisible by q = " + std::to_string(q));
    const std::string msg2 = error_on_every_rank(g, [&] { DistMatrix<float>(grid, q, 3 * q - 1); });
    CHECK(msg2.find("cols = " + std::to_string(3 * q - 1)) != std::string::npos);
  }
  DistMatrix<double> A(grid, 2 * q, 3 * q), B(grid, 4 * q, q), C(grid, 2 * q, q);
  const std::string inner = error_on_every_rank(g, [&] { summa_ab(A, B); });
  CHECK(inner.find("inner dimensions differ: A is " + std::to_string(2 * q) + "x" + std::to_string(3 * q) + ", B is " +
                   std::to_string(4 * q) + "x" + std::to_string(q)) != std::string::npos);
  CHECK(error_on_every_rank(g, [&] { summa_atb(A, B); }).find("inner dimensions differ") != std::string::npos);
  CHECK(error_on_every_rank(g, [&] { summa_abt(A, B); }).find("inner dimensions differ") != std::string::npos);
  DistMatrix<double> B2(grid, 3 * q, q);
  CHECK(error_on_every_rank(g, [&] { summa_ab(1.0, A, B2, 0.0, B2); }).find("must not be one of the inputs") !=
        std::string::npos);
  DistMatrix<double> Cwrong(grid, q, q);
  CHECK(error_on_every_rank(g, [&] { summa_ab(1.0, A, B2, 0.0, Cwrong); }).find("C is") != std::string::npos);

  const Grid other = Grid::create(world, q);
  DistMatrix<double> B_other(other, 3 * q, q);
  CHECK(error_on_every_rank(g, [&] { summa_ab(A, B_other); }) == "summa_ab: the matrices belong to different grids");
  CHECK(error_on_every_rank(g, [&] { summa_ab(1.0, A, B2, 0.0, C); }).empty());  // and the good call still works

  // Zero-sized dimensions are products like any other: m = 0 or n = 0 give an empty C, k = 0 gives C = beta C.
  DistMatrix<double> A0(grid, 0, 3 * q), B0(grid, 3 * q, 0), Ak0(grid, 2 * q, 0), Bk0(grid, 0, q);
  CHECK(error_on_every_rank(g, [&] { CHECK(summa_ab(A0, B2).rows() == 0); }).empty());
  CHECK(error_on_every_rank(g, [&] { CHECK(summa_ab(A, B0).cols() == 0); }).empty());
  C.fill_random(5);
  const reference::Matrix before = C.to_global();
  CHECK(error_on_every_rank(g, [&] { summa_ab(1.0, Ak0, Bk0, 0.5, C); }).empty());
  CHECK(C.to_global() == reference::Matrix(0.5 * before));
}

}  // namespace optimus::test

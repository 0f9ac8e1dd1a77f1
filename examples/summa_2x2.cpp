// The main job for now: C = A * B on a 2 x 2 grid (4 MPI ranks), checked against Eigen on the full
// matrices, with the traffic each rank received beside the SUMMA formula.
//
//   mpirun -np 4 ./summa_2x2 [--m M] [--n N] [--k K] [--q Q] [--timeout SECONDS]
#include <cstdio>
#include <optimus/programs/cli.hpp>
#include <optimus/optimus.hpp>

#include "program_options.hpp"

namespace {

struct Options {
  std::int64_t m = 384, n = 256, k = 512;
  int q = 2;
  std::chrono::milliseconds timeout{0};  // the watchdog (0: off)
};

Options parse(int argc, char** argv) {
  const optimus::cli::Options cli(argc, argv, 1, optimus::apps::summa_2x2_options());  // --help lists them
  Options o;
  o.m = cli.integer("m", o.m);
  o.n = cli.integer("n", o.n);
  o.k = cli.integer("k", o.k);
  o.q = static_cast<int>(cli.integer("q", o.q));
  o.timeout = cli.timeout();
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  optimus::Process ctx(argc, argv);
  try {
    const Options o = parse(argc, argv);
    ctx.world().set_timeout(o.timeout);
    optimus::Grid grid = optimus::Grid::create(ctx.world(), o.q);

    // Every rank draws the same global inputs; each keeps its block.
    using M = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const M a = optimus::reference::random_matrix(o.m, o.k, 1);
    const M b = optimus::reference::random_matrix(o.k, o.n, 2);
    auto A = optimus::DistMatrix<double>::from_global(grid, a);
    auto B = optimus::DistMatrix<double>::from_global(grid, b);

    auto C = optimus::summa_ab(A, B);  // C: [m, n], rank (i, j) holds block (i, j)
    const std::uint64_t received = grid.row().stats().bytes_received + grid.col().stats().bytes_received;
    const M c = C.to_global();

    const auto cmp = optimus::reference::compare_relative(c, optimus::reference::matmul(a, b), 1e-12);
    const auto q = static_cast<std::uint64_t>(o.q);
    const std::uint64_t formula = (q - 1) * static_cast<std::uint64_t>(o.m * o.k + o.k * o.n) / (q * q) * 8;
    const double worst = grid.grid().all_reduce(cmp.ok() ? 0.0 : 1.0, optimus::ReduceOp::max);
    if (ctx.world().rank() == 0) {
      std::printf("Optimus SUMMA C = A*B on a %dx%d grid (%d ranks): A %lldx%lld, B %lldx%lld, f64\n", o.q, o.q,
                  ctx.world().size(), static_cast<long long>(o.m), static_cast<long long>(o.k),
                  static_cast<long long>(o.k), static_cast<long long>(o.n));
      const optimus::cpu::Processor processor = optimus::cpu::this_processor();
      std::printf("  %s\n  %s\n", optimus::cpu::describe(processor).c_str(),
                  optimus::cpu::describe(optimus::cpu::blas_kernel(), processor).c_str());
      std::printf("  bytes received per rank: %llu (formula (q-1)/q^2 * (mk + kn) * 8 = %llu) %s\n",
                  static_cast<unsigned long long>(received), static_cast<unsigned long long>(formula),
                  received == formula ? "equal" : "DIFFERENT");
      std::printf("  max relative error against Eigen: %.3g -> %s\n", cmp.rel_error,
                  worst == 0.0 && received == formula ? "verified" : "WRONG");
    }
    return worst == 0.0 && received == formula ? 0 : 1;
  } catch (const optimus::cli::HelpRequested& help) {
    if (ctx.world().rank() == 0) std::printf("%s\n", help.what());
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("summa_2x2", e);
  }
}

// optimus-bench summa: times summa_ab / summa_abt / summa_atb on the q x q grid of all ranks, counts the
// bytes each rank received against the (q-1)/q^2 formula, checks every result block against Eigen, and
// when ScaLAPACK is present times p?gemm on the same data and block layout in the same run.
#include <sys/resource.h>

#include <Eigen/Core>
#include <cmath>
#include <memory>

#include "commands.hpp"
#include "bench_options.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/timeline.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/reference/matmul.hpp"
#include "overlap.hpp"
#include "report.hpp"
#include "scalapack.hpp"
#include "timing.hpp"

namespace optimus::bench {

double peak_rss_bytes_max(Communicator& comm) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return comm.all_reduce(static_cast<double>(usage.ru_maxrss) * 1024.0, ReduceOp::max);
}

namespace {

enum class Op { ab, abt, atb };

struct Case {
  Op op;
  std::int64_t m, n, k;  // C: [m, n], inner dimension k
};

Op parse_op(const std::string& s) {
  if (s == "ab") return Op::ab;
  if (s == "abt") return Op::abt;
  if (s == "atb") return Op::atb;
  OPTIMUS_FAIL("unknown product '", s, "' (expected ab, abt or atb)");
}
const char* name_of(Op op) { return op == Op::ab ? "ab" : op == Op::abt ? "abt" : "atb"; }

// Global shapes of A and B for a case.
std::pair<std::int64_t, std::int64_t> shape_a(const Case& c) {
  return c.op == Op::atb ? std::pair{c.k, c.m} : std::pair{c.m, c.k};
}
std::pair<std::int64_t, std::int64_t> shape_b(const Case& c) {
  return c.op == Op::abt ? std::pair{c.n, c.k} : std::pair{c.k, c.n};
}

// The bytes each rank receives: (q-1)/q^2 of the two matrices that move (docs/design.md, "SUMMA").
std::uint64_t formula_bytes(const Case& c, int q, std::size_t elem) {
  const auto [ar, ac] = shape_a(c);
  const auto [br, bc] = shape_b(c);
  const std::int64_t moving = c.op == Op::ab ? ar * ac + br * bc : c.op == Op::abt ? br * bc + c.m * c.n : ar * ac + c.m * c.n;
  const auto qq = static_cast<std::uint64_t>(q);
  return (qq - 1) * static_cast<std::uint64_t>(moving) / (qq * qq) * elem;
}

constexpr std::uint64_t kSeedA = 101, kSeedB = 202;

// This rank's block of the exact product, in fp64 from the same (rounded to T) inputs.
template <class T>
reference::Matrix reference_block(const Case& c, const DistMatrix<T>& out) {
  const std::int64_t r0 = out.row_offset(), c0 = out.col_offset(), mb = out.local_rows(), nb = out.local_cols();
  auto draw = [](std::int64_t row, std::int64_t col, std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
    return reference::Matrix(reference::random_block(row, col, rows, cols, seed).cast<T>().template cast<double>());
  };
  switch (c.op) {
    case Op::ab: return draw(r0, 0, mb, c.k, kSeedA) * draw(0, c0, c.k, nb, kSeedB);
    case Op::abt: return draw(r0, 0, mb, c.k, kSeedA) * draw(c0, 0, nb, c.k, kSeedB).transpose();
    case Op::atb: return draw(0, r0, c.k, mb, kSeedA).transpose() * draw(0, c0, c.k, nb, kSeedB);
  }
  return {};
}

template <class T>
std::int64_t count_wrong(Communicator& comm, const reference::Matrix& got, const reference::Matrix& expected) {
  const double tol = sizeof(T) == 4 ? 1e-4 : 1e-10;
  const auto cmp = reference::compare_relative(got, expected, tol);
  return static_cast<std::int64_t>(comm.all_reduce(static_cast<double>(cmp.wrong), ReduceOp::sum));
}

struct SummaSettings {
  int warmup;
  int iters;
  bool scalapack;
  std::string trace;  // Chrome trace of the last case's overlapped runs, when set
};

template <class T>
void run_case(Grid& grid, const Case& c, const SummaSettings& s, Report& report, double& worst_ratio,
              std::int64_t& total_wrong) {
  const auto [ar, ac] = shape_a(c);
  const auto [br, bc] = shape_b(c);
  DistMatrix<T> A(grid, ar, ac), B(grid, br, bc), C(grid, c.m, c.n);
  A.fill_random(kSeedA);
  B.fill_random(kSeedB);
  auto product = [&] {
    switch (c.op) {
      case Op::ab: summa_ab(T(1), A, B, T(0), C); break;
      case Op::abt: summa_abt(T(1), A, B, T(0), C); break;
      case Op::atb: summa_atb(T(1), A, B, T(0), C); break;
    }
  };
  // Traffic of one product, measured on the row and column communicators.
  grid.row().reset_stats();
  grid.col().reset_stats();
  product();
  const std::uint64_t received = grid.row().stats().bytes_received + grid.col().stats().bytes_received;
  const double received_max = grid.grid().all_reduce(static_cast<double>(received), ReduceOp::max);
  const double received_min = grid.grid().all_reduce(static_cast<double>(received), ReduceOp::min);
  const std::uint64_t formula = formula_bytes(c, grid.q(), sizeof(T));

  // Each mode's product on its own copies of the operands, made on its handle (the same values).
  const OverlapTiming t = time_blocking_and_overlapped(grid, s.warmup, s.iters, s.trace, [&](const Grid& g) {
    auto a = std::make_shared<DistMatrix<T>>(g, ar, ac), b = std::make_shared<DistMatrix<T>>(g, br, bc),
         out = std::make_shared<DistMatrix<T>>(g, c.m, c.n);
    a->fill_random(kSeedA);
    b->fill_random(kSeedB);
    return [a, b, out, op = c.op] {
      switch (op) {
        case Op::ab: summa_ab(T(1), *a, *b, T(0), *out); break;
        case Op::abt: summa_abt(T(1), *a, *b, T(0), *out); break;
        case Op::atb: summa_atb(T(1), *a, *b, T(0), *out); break;
      }
    };
  });
  const double seconds = t.overlapped_s, blocking = t.blocking_s, overlap_fraction = t.fraction;
  const reference::Matrix expected = reference_block(c, C);
  const std::int64_t wrong = count_wrong<T>(grid.grid(), C.local_map().template cast<double>(), expected);
  const double flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
  const double rss = peak_rss_bytes_max(grid.grid());
  const double tracked = grid.grid().all_reduce(static_cast<double>(grid.memory().peak_total()), ReduceOp::max);

  std::string p_ms = "n/a", p_gf = "n/a", p_wrong = "n/a", ratio = "n/a";
  if (s.scalapack) {
    const char op_a = c.op == Op::atb ? 'T' : 'N';
    const char op_b = c.op == Op::abt ? 'T' : 'N';
    const PgemmRun<T> p = run_pgemm<T>(grid, op_a, op_b, A, B, c.m, c.n, c.k, s.warmup, s.iters);
    const std::int64_t pw = count_wrong<T>(grid.grid(), p.local_c.template cast<double>(), expected);
    p_ms = format("%.3f", p.seconds * 1e3);
    p_gf = format("%.2f", flops / p.seconds / 1e9);
    p_wrong = format("%lld", static_cast<long long>(pw));
    ratio = format("%.3f", p.seconds / seconds);
    worst_ratio = std::min(worst_ratio, p.seconds / seconds);
    total_wrong += pw;
  }
  total_wrong += wrong;
  report.row({name_of(c.op), format("%lld", static_cast<long long>(c.m)), format("%lld", static_cast<long long>(c.n)),
              format("%lld", static_cast<long long>(c.k)), format("%d", grid.q()), std::string(name_of(dtype_of<T>)),
              format("%.3f", seconds * 1e3), format("%.3f", blocking * 1e3), format("%.2f", overlap_fraction),
              format("%.2f", flops / seconds / 1e9), format("%.0f", received_max),
              format("%llu", static_cast<unsigned long long>(formula)),
              received_max == received_min && received_max == static_cast<double>(formula) ? "yes" : "NO",
              format("%.1f", rss / (1 << 20)), format("%.1f", tracked / (1 << 20)),
              format("%lld", static_cast<long long>(wrong)), p_ms, p_gf, p_wrong,
              ratio});
  if (grid.grid().rank() == 0) report.print_row(stdout, report.rows() - 1);
}

}  // namespace

int run_summa_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("summa"));
  world.set_timeout(o.timeout());  // --timeout: the watchdog
  const std::vector<std::int64_t> sizes = o.integers("n", "1024");
  const std::vector<std::string> ops = o.list("ops", "ab,abt,atb");
  const std::vector<std::string> dtypes = o.list("dtype", "f64");
  const SummaSettings s{static_cast<int>(o.integer("warmup", 2)), static_cast<int>(o.integer("iters", 5)),
                   o.text("scalapack", "auto") != "off" && scalapack_available(), o.text("trace", "")};
  OPTIMUS_CHECK(s.warmup >= 0 && s.iters >= 1, "need --warmup >= 0 and --iters >= 1, got ", s.warmup, " and ", s.iters);
  OPTIMUS_CHECK(o.text("scalapack", "auto") != "on" || scalapack_available(),
                "--scalapack on, but optimus-bench was built without ScaLAPACK");

  cpu::set_gemm_threads(1);  // one thread per rank, for Optimus and ScaLAPACK alike
  const int q = static_cast<int>(std::lround(std::sqrt(world.size())));
  OPTIMUS_CHECK(q * q == world.size(), "optimus-bench summa runs on a q x q grid of all ranks; world size ",
                world.size(), " is not a square");
  Grid grid = Grid::create(world, q);

  Report report({{"op", 4}, {"m", 6}, {"n", 6}, {"k", 6}, {"q", 2}, {"dtype", 5}, {"time_ms", 10}, {"blocking_ms", 11}, {"overlap", 7}, {"GFLOP/s", 9},
                 {"recv_B/rank", 12}, {"formula_B", 12}, {"equal", 5}, {"peakRSS_MiB", 11}, {"tensors_MiB", 11}, {"#wrong", 6},
                 {"pgemm_ms", 10}, {"pgemm_GF/s", 10}, {"#wrong", 6}, {"pgemm/opt", 9}});
  report.header(format("optimus-bench summa: %d ranks as a %dx%d grid, backend %s, warmup %d, iters %d", world.size(), q,
                       q, world.backend().c_str(), s.warmup, s.iters));
  report.header("local GEMM: Optimus on " + cpu::gemm_backend() + "; ScaLAPACK on " +
                (s.scalapack ? scalapack_blas() : std::string("(not compared)")));
  report.header("time: overlapped SUMMA (the default), blocking_ms: blocking SUMMA; overlap: communication hidden / "
                "communication (exposed waits of the blocking run), from the ranks' own timers");
  report.header("time: median over iters of the max over ranks; recv_B/rank: measured bytes received per rank "
                "(max over ranks), formula_B: (q-1)/q^2 of the two moving matrices; pgemm/opt > 1 means Optimus is faster");
  if (world.rank() == 0) report.print_header(stdout);

  double worst_ratio = INFINITY;
  std::int64_t total_wrong = 0;
  for (const std::string& dt : dtypes) {
    const DType dtype = parse_dtype(dt);
    OPTIMUS_CHECK(dtype != DType::bf16, "optimus-bench summa runs f32 or f64 on the CPU, not bf16");
    for (const std::int64_t n : sizes) {
      for (const std::string& op : ops) {
        const Case c{parse_op(op), o.integer("m", n), n, o.integer("k", n)};
        if (dtype == DType::f64) {
          run_case<double>(grid, c, s, report, worst_ratio, total_wrong);
        } else {
          run_case<float>(grid, c, s, report, worst_ratio, total_wrong);
        }
      }
    }
  }
  report.footer(format("Out of bounds values : %lld %s", static_cast<long long>(total_wrong), total_wrong ? "FAILED" : "OK"));
  if (s.scalapack) report.footer(format("Slowest pgemm/optimus time ratio: %.3f", worst_ratio));
  if (world.rank() == 0) {
    report.print_footer(stdout);
    if (o.has("json")) report.write_json(o.text("json", ""), "summa");
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace optimus::bench

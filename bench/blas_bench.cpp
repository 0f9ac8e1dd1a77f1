// optimus-bench blas: the CPU GEMM's kernels side by side in one run. For every OpenBLAS kernel this processor runs
// (or those --kernels names), switched to in this process (optimus/core/blas_kernel.hpp's use_blas_kernel, which
// checks its products first), f32 and f64 n^3 products on 1, 2, ... threads at once (--threads), beside the
// processor's theoretical rate for those cores (cpu_peak.hpp), each row the best of --sweeps sweeps over the kernels.
// The kernel the program chose when it loaded is marked, and is the one in use again at the end. The Eigen backend
// has one kernel: one row per thread count.
#include <string>
#include <vector>

#include "bench_options.hpp"
#include "commands.hpp"
#include "cpu_peak.hpp"
#include "optimus/core/blas_kernel.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "report.hpp"

namespace optimus::bench {
namespace {

// Every OpenBLAS kernel Optimus might choose, oldest first; those the processor cannot run are left out.
std::vector<std::string> runnable_kernels(const cpu::Processor& p) {
  std::vector<std::string> kernels;
  for (const char* k : {"Prescott", "Sandybridge", "Haswell", "Zen", "SkylakeX", "Cooperlake"}) {
    if (cpu::openblas::runs_on(k, p)) kernels.emplace_back(k);
  }
  return kernels;
}

std::string rate(double flops) { return flops > 0 ? format("%.1f", flops / 1e9) : "n/a"; }
std::string share(double part, double whole) { return whole > 0 ? format("%.1f", 100 * part / whole) : "n/a"; }

}  // namespace

int run_blas_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("blas"));
  OPTIMUS_CHECK(world.size() == 1, "blas runs its threads inside one process; launch 1 process, not ", world.size());
  const std::int64_t n = o.integer("n", 1024);
  const std::vector<std::int64_t> threads = o.integers("threads", "1,2");
  const cpu::Processor processor = cpu::this_processor();
  const cpu::BlasKernel chosen = cpu::blas_kernel();
  std::vector<std::string> kernels = o.has("kernels") ? o.list("kernels", "") : runnable_kernels(processor);
  if (!chosen.changeable) kernels = {chosen.kernel};  // Eigen, or an OpenBLAS built for one target
  Report report({{"kernel", 12}, {"simd", 7}, {"loaded", 6}, {"threads", 7}, {"n", 5}, {"f32_GF/s", 9},
                 {"f64_GF/s", 9}, {"hw_f32_GF/s", 11}, {"f32%hw", 6}, {"f64%hw", 6}, {"#wrong", 6}});
  report.header(format("optimus-bench blas: f32 and f64 %lld^3 products through the CPU GEMM on T threads at once, "
                       "each kernel of %s in turn",
                       static_cast<long long>(n), chosen.library.c_str()));
  report.header("GF/s: T products over the slowest thread's time, the best of five rounds and of the sweeps; hw: T "
                "cores x the clock each ran at (measured right after) x f32 FLOPs per cycle (f64: half); loaded: * "
                "the kernel chosen "
                "when the program loaded; #wrong: 1 if the kernel's check products (exact small integers) differ");
  // Each sweep measures every kernel in turn; a row keeps its best sweep (a virtual machine's cores are now and then
  // taken away for a while: sweeps apart in time do not all meet it).
  struct Row {
    cpu::BlasKernel kernel;
    std::int64_t threads = 0;
    Peak f32, f64;
    bool wrong = false;
  };
  std::vector<Row> rows;
  for (std::int64_t sweep = 0; sweep < o.integer("sweeps", 3); ++sweep) {
    std::size_t r = 0;
    for (const std::string& kernel : kernels) {
      const cpu::BlasKernel now = chosen.changeable ? cpu::use_blas_kernel(kernel) : chosen;
      const bool wrong = !cpu::check_gemm_products().empty();
      for (std::int64_t t : threads) {
        if (sweep == 0) rows.push_back({.kernel = now, .threads = t, .f32 = {}, .f64 = {}, .wrong = false});
        Row& row = rows[r++];
        row.wrong = row.wrong || wrong;
        const Peak f32 = concurrent_cpu_peak<float>(static_cast<int>(t), n);
        const Peak f64 = concurrent_cpu_peak<double>(static_cast<int>(t), n);
        if (f32.measured > row.f32.measured) row.f32 = f32;
        if (f64.measured > row.f64.measured) row.f64 = f64;
      }
    }
  }
  if (chosen.changeable) cpu::use_blas_kernel(chosen.kernel);
  bool ok = true;
  for (const Row& row : rows) {
    ok = ok && !row.wrong;
    report.row({row.kernel.kernel, std::string(cpu::name_of(row.kernel.simd)),
                row.kernel.kernel == chosen.kernel ? "*" : "", format("%lld", static_cast<long long>(row.threads)),
                format("%lld", static_cast<long long>(n)), rate(row.f32.measured), rate(row.f64.measured),
                rate(row.f32.hardware), share(row.f32.measured, row.f32.hardware),
                share(row.f64.measured, row.f64.hardware), row.wrong ? "1" : "0"});
  }
  report.footer(ok ? "every kernel computed the check products right; the loaded kernel is in use again"
                   : "FAILED: a kernel computed a check product wrong");
  report.print(stdout);
  if (o.has("json")) report.write_json(o.text("json", ""), "blas");
  return ok ? 0 : 1;
}

}  // namespace optimus::bench

// optimus-bench activations: the bytes of activations a transformer block saves per rank for backward under each
// recomputation policy — block_saved_bytes (optimus/layers/recompute.hpp) beside the memory tracker's figure for one
// block forward on an in-process q x q grid, and beside Korthikanti et al.'s (2022) per-layer figures split over the
// same q^2 ranks (tensor + sequence parallelism: sbh(34 + 5as/h)/t, 34sbh/t, 2sbh/t for t = q^2; 16-bit activations
// and 1-byte dropout masks). Then the largest batch whose saved activations fit a per-rank budget for L layers
// (full recomputation also holds one block's full context while that block runs).
//
//   optimus-bench activations [--h 1024] [--s 1024] [--heads 16] [--ffn 4h] [--layers 24] [--q 1,2]
//                             [--gemm f32,bf16] [--budget-gib 16] [--measure on|off] [--json FILE]
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "block_model.hpp"
#include "optimus/programs/arch_options.hpp"
#include "commands.hpp"
#include "bench_options.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/layers/block.hpp"
#include "optimus/layers/recompute.hpp"
#include "report.hpp"

namespace optimus::bench {
namespace {

struct ActivationsShape {
  std::int64_t hidden, seq, heads, ffn, layers;
  BlockConfig block;  // --arch
};

// One block of `s`, with dropout (its masks are not saved: regenerated from the counter RNG).
GptConfig config_of(const ActivationsShape& s) {
  GptConfig config;
  config.hidden = s.hidden;
  config.heads = s.heads;
  config.ffn = s.ffn;
  config.max_seq = s.seq;
  config.layers = 1;
  config.dropout = 0.1;
  config.block = s.block;
  return config;
}

// Korthikanti et al.'s bytes per layer for one sequence (b = 1), split over t ranks (with sequence parallelism).
double korthikanti(const ActivationsShape& s, Recompute policy, double t) {
  const double sh = static_cast<double>(s.seq * s.hidden);
  switch (policy) {
    case Recompute::none:
      return sh * (34.0 + 5.0 * static_cast<double>(s.heads * s.seq) / static_cast<double>(s.hidden)) / t;
    case Recompute::selective: return 34.0 * sh / t;
    case Recompute::full: return 2.0 * sh / t;
  }
  return 0;
}

// The tracker's count of what one block's context holds after a training forward of `batch` sequences on an
// in-process q x q grid (the figure of grid rank 0; every rank holds the same).
std::int64_t measured(const ActivationsShape& s, int q, ops::GemmMath math, std::int64_t batch, Recompute policy) {
  std::int64_t held = 0;
  run_in_process(q * q, [&](Communicator& world) {
    const Grid grid = Grid::create(world, q).with({.gemm_math = math});
    TransformerBlock2D<float> block(grid, config_of(s), 0);
    block.set_recompute(policy);
    DistMatrix<float> x(grid, batch * s.seq, s.hidden);
    x.fill_random(1);
    const std::uint64_t before = grid.memory().current(MemoryKind::activations);
    TransformerBlock2D<float>::Context saved;
    block.forward(x, s.seq, Pass::train(1, 0), saved);
    if (world.rank() == 0) held = static_cast<std::int64_t>(grid.memory().current(MemoryKind::activations) - before);
  });
  return held;
}

}  // namespace

int run_activations(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("activations"));
  world.set_timeout(o.timeout());  // --timeout: the watchdog
  ActivationsShape s{.hidden = o.integer("h", 1024), .seq = o.integer("s", 1024), .heads = o.integer("heads", 16),
          .ffn = 0, .layers = o.integer("layers", 24), .block = cli::arch_of(o)};
  s.ffn = o.integer("ffn", s.block == BlockConfig{} ? 4 * s.hidden : llama_ffn(s.hidden, 64));
  const double budget = o.real("budget-gib", 16.0) * 1024.0 * 1024.0 * 1024.0;
  const std::string measure = o.text("measure", "on");
  OPTIMUS_CHECK(measure == "on" || measure == "off", "--measure must be on or off, got '", measure, "'");
  OPTIMUS_CHECK(s.hidden > 0 && s.seq > 0 && s.heads > 0 && s.ffn > 0 && s.layers > 0 && budget > 0,
                "activations: --h, --s, --heads, --ffn, --layers and --budget-gib must be positive");
  std::vector<int> qs;
  for (const std::int64_t q : o.integers("q", "1,2")) qs.push_back(static_cast<int>(q));
  std::vector<ops::GemmMath> maths;
  for (const std::string& g : o.list("gemm", "f32,bf16")) {
    OPTIMUS_CHECK(g == "f32" || g == "bf16", "--gemm values must be f32 or bf16, got '", g, "'");
    maths.push_back(g == "bf16" ? ops::GemmMath::bf16 : ops::GemmMath::f32);
  }
  cpu::set_gemm_threads(1);

  Report report({{"q", 3}, {"gemm", 5}, {"policy", 10}, {"formula_B", 13}, {"measured_B", 13}, {"#wrong", 7},
                 {"korthikanti_B", 14}, {"ratio", 6}, {"max_batch", 10}});
  report.header(format("optimus-bench activations: bytes saved per rank per block for one sequence, h=%lld s=%lld "
                       "heads=%lld ffn=%lld; largest batch for %lld layers in %.3g GiB of activations per rank",
                       static_cast<long long>(s.hidden), static_cast<long long>(s.seq),
                       static_cast<long long>(s.heads), static_cast<long long>(s.ffn),
                       static_cast<long long>(s.layers), budget / (1024.0 * 1024.0 * 1024.0)));
  report.header("formula_B: block_saved_bytes (f32 model; gemm bf16 keeps what backward reads in bf16); "
                "measured_B: the tracker after one forward of q sequences, per sequence");
  report.header("korthikanti_B: their per-layer bytes over t = q^2 ranks (16-bit, dropout masks stored); "
                "max_batch: sequences per replica, a multiple of q");
  if (world.rank() == 0) report.print_header(stdout);
  std::int64_t wrong_total = 0;
  for (int q : qs) {
    OPTIMUS_CHECK(q >= 1 && s.heads % q == 0 && s.hidden % (q * q) == 0 && s.ffn % (q * q) == 0,
                  "activations: q = ", q, " must divide heads and q*q hidden and ffn");
    for (ops::GemmMath math : maths) {
      const bool bf16 = math == ops::GemmMath::bf16;
      const BlockActivations one = BlockActivations::of(config_of(s), q, s.seq, q, 4, bf16 ? 2 : 4);
      const double none_per_seq = static_cast<double>(block_saved_bytes(one, Recompute::none)) / q;
      for (Recompute policy : {Recompute::none, Recompute::selective, Recompute::full}) {
        const std::int64_t formula = block_saved_bytes(one, policy);
        std::int64_t got = -1, wrong = 0;
        if (measure == "on" && world.rank() == 0) {
          got = measured(s, q, math, q, policy);
          wrong = got == formula ? 0 : 1;
        }
        wrong_total += wrong;
        const double per_seq = static_cast<double>(formula) / q;
        const double k = korthikanti(s, policy, static_cast<double>(q * q));
        // L blocks' contexts; full recomputation also holds one block's whole context while it runs.
        const double per_seq_model = static_cast<double>(s.layers) * per_seq +
                                     (policy == Recompute::full ? none_per_seq : 0.0);
        const auto max_batch = static_cast<long long>(budget / per_seq_model) / q * q;
        report.row({format("%d", q), bf16 ? "bf16" : "f32", name_of(policy), format("%.0f", per_seq),
                    got < 0 ? "-" : format("%.0f", static_cast<double>(got) / q), format("%lld",
                    static_cast<long long>(wrong)), format("%.0f", k), format("%.2f", per_seq / k),
                    format("%lld", max_batch)});
        if (world.rank() == 0) report.print_row(stdout, report.rows() - 1);
      }
    }
  }
  report.footer(format("%s: formula %s the tracker", measure == "on" ? "checked" : "not measured",
                       wrong_total == 0 ? "equals" : "DIFFERS FROM"));
  if (world.rank() == 0) {
    report.print_footer(stdout);
    if (o.has("json")) report.write_json(o.text("json", ""), "activations");
  }
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace optimus::bench

// optimus-bench scaling: one configuration — layout 1D (Megatron) or 2D (Optimus), p ranks, b, s, h, heads,
// ffn, layers, dtype — trained forward and backward through `layers` transformer blocks. One row: time per
// step (max over ranks), FLOP/s per rank, bytes and messages received per rank per step (counters) beside the
// formula's prediction, activation and parameter memory per rank beside the formula's, and #wrong against the
// fp64 reference (small shapes, --check on). 2D rows also time the step with blocking SUMMA and give the overlap
// fraction and the split of the step into SUMMA GEMMs and exposed SUMMA communication.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "block_model.hpp"
#include "optimus/programs/arch_options.hpp"
#include "commands.hpp"
#include "bench_options.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/layers/block.hpp"
#include "optimus/layers/megatron/block.hpp"
#include "optimus/reference/gpt.hpp"
#include "optimus/reference/matmul.hpp"
#include "overlap.hpp"
#include "report.hpp"
#include "timing.hpp"
#include "traffic_model.hpp"

namespace optimus::bench {
namespace {

struct Config {
  bool two_d;
  ops::GemmMath math;  // f32, or bf16 operands (mixed precision)
  BlockShape shape;
  BlockConfig block;  // --arch
  std::int64_t layers;
  int warmup, iters;
  bool check;
  std::string trace;  // 2D: Chrome trace of the overlapped steps, when set
};

struct ScalingMeasured {
  double seconds = 0;
  std::uint64_t bytes = 0, messages = 0;
  double activations = 0, parameters = 0, peak = 0;  // bytes per rank, max over ranks
  std::int64_t wrong = -1;                           // -1: not checked
  std::optional<OverlapTiming> overlap;              // 2D: blocking vs overlapped SUMMA
};

// The blocks of one layout on `owner` (the Grid or Group they are built on; `on` its grid), with the step's input
// and output gradient; step(measure) runs forward and backward once, keeping the results.
template <class T, class Block>
struct Blocks {
  template <class Owner>
  Blocks(const Config& c, const Owner& owner, const Grid& on)
      : seq(c.shape.seq),
        x(DistMatrix<T>::from_global(on, reference::random_matrix(c.shape.tokens(), c.shape.hidden, 1))),
        dy(DistMatrix<T>::from_global(on, reference::random_matrix(c.shape.tokens(), c.shape.hidden, 2))),
        out(on, c.shape.tokens(), c.shape.hidden),
        din(on, c.shape.tokens(), c.shape.hidden) {
    const GptConfig g = block_config(c.shape, c.block, c.layers);
    for (std::int64_t l = 0; l < c.layers; ++l) {
      blocks.push_back(std::make_unique<Block>(owner, g, l));
      std::vector<ParameterRef<T>> refs;
      blocks.back()->parameters(refs);
      for (const ParameterRef<T>& r : refs) init_parameter(r, g, on.device());
    }
  }
  // Returns the bytes of activations held after the forward.
  std::uint64_t step() {
    DistMatrix<T> a = x.clone();
    std::vector<typename Block::Context> saved(blocks.size());
    const Pass pass = Pass::train(1, 0);
    for (std::size_t l = 0; l < blocks.size(); ++l) a = blocks[l]->forward(a, seq, pass, saved[l]);
    const std::uint64_t held = x.grid().memory().current(MemoryKind::activations);
    DistMatrix<T> d = dy.clone();
    for (std::size_t l = blocks.size(); l-- > 0;) d = blocks[l]->backward(std::move(saved[l]), d);
    out = std::move(a);
    din = std::move(d);
    return held;
  }

  std::int64_t seq;
  std::vector<std::unique_ptr<Block>> blocks;
  DistMatrix<T> x, dy, out, din;
};

// Runs the blocks of one layout. `Block` is TransformerBlock2D or TransformerBlock1D; `owner` the Grid or
// Group they are built on; `comms` the communicators whose counters make up the traffic. With `time_steps` the step is
// timed (seconds); without, the caller times it (2D: blocking against overlapped SUMMA, time_summa_overlap).
template <class T, class Block, class Owner>
ScalingMeasured run_blocks(Communicator& world, const Config& c, const Owner& owner, const Grid& on,
                    const std::vector<Communicator*>& comms, bool time_steps) {
  const std::int64_t n = c.shape.tokens(), h = c.shape.hidden;
  const reference::Matrix xg = reference::random_matrix(n, h, 1), dyg = reference::random_matrix(n, h, 2);
  MemoryTracker& memory = on.memory();
  ScalingMeasured m;
  DistMatrix<T> out(on, n, h), din(on, n, h);
  {
    Blocks<T, Block> blocks(c, owner, on);
    for (Communicator* comm : comms) comm->reset_stats();
    memory.reset_peaks();
    m.activations = static_cast<double>(blocks.step());
    for (Communicator* comm : comms) {
      m.bytes += comm->stats().bytes_received;
      m.messages += comm->stats().calls;
    }
    m.peak = static_cast<double>(memory.peak_total());
    m.parameters = static_cast<double>(memory.current(MemoryKind::parameters));
    if (time_steps) {
      m.seconds = time_max_over_ranks(world, c.warmup, c.iters, [&] { blocks.step(); });
    }
    out = std::move(blocks.out);
    din = std::move(blocks.din);
  }
  m.bytes = static_cast<std::uint64_t>(world.all_reduce(static_cast<double>(m.bytes), ReduceOp::max));
  m.messages = static_cast<std::uint64_t>(world.all_reduce(static_cast<double>(m.messages), ReduceOp::max));
  m.activations = world.all_reduce(m.activations, ReduceOp::max);
  m.parameters = world.all_reduce(m.parameters, ReduceOp::max);
  m.peak = world.all_reduce(m.peak, ReduceOp::max);
  if (c.check) {
    const auto [y_ref, dx_ref] = reference_blocks(c.shape, c.block, c.layers, 0.0, xg, dyg);
    const double tol = sizeof(T) == 8 ? 1e-10 : c.math == ops::GemmMath::bf16 ? 2e-2 : 1e-4;
    const reference::Matrix y = out.to_global().template cast<double>();
    const reference::Matrix dx = din.to_global().template cast<double>();
    const double wrong = world.rank() == 0 ? static_cast<double>(reference::compare_relative(y, y_ref, tol).wrong +
                                                                 reference::compare_relative(dx, dx_ref, tol).wrong)
                                           : 0.0;
    m.wrong = static_cast<std::int64_t>(world.all_reduce(wrong, ReduceOp::max));
  }
  return m;
}

// The 2D step timed with blocking and with overlapped SUMMA (each on its own blocks, built on a handle of `grid`):
// m.overlap, and m.seconds the overlapped step's.
template <class T>
void time_summa_overlap(const Config& c, const Grid& grid, ScalingMeasured& m) {
  m.overlap = time_blocking_and_overlapped(grid, c.warmup, c.iters, c.trace, [&c](const Grid& handle) {
    auto blocks = std::make_shared<Blocks<T, TransformerBlock2D<T>>>(c, handle, handle);
    return [blocks] { blocks->step(); };
  });
  m.seconds = m.overlap->overlapped_s;
}

template <class T>
ScalingMeasured run(Communicator& world, const Config& c) {
  if (c.two_d) {
    const int q = static_cast<int>(std::lround(std::sqrt(world.size())));
    OPTIMUS_CHECK(q * q == world.size(), "scaling --layout 2d needs a square number of ranks, got ", world.size());
    const Grid grid = Grid::create(world, q).with({.overlap = true, .gemm_math = c.math, .check_finite = false,
                                                   .timeline = nullptr});
    ScalingMeasured m = run_blocks<T, TransformerBlock2D<T>>(world, c, grid, grid, {&grid.row(), &grid.col()}, false);
    time_summa_overlap<T>(c, grid, m);
    return m;
  }
  const megatron::Group group = megatron::Group(world).with({.overlap = true, .gemm_math = c.math,
                                                              .check_finite = false, .timeline = nullptr});
  return run_blocks<T, megatron::TransformerBlock1D<T>>(world, c, group, group.local(), {&group.tp()}, true);
}

}  // namespace

int run_scaling_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("scaling"));
  world.set_timeout(o.timeout());  // --timeout: the watchdog
  OPTIMUS_CHECK(o.text("device", "cpu") == "cpu", "scaling --device ", o.text("device", "cpu"),
                ": scaling runs MPI ranks on the CPU; blocks on one GPU run with `optimus-bench layer --device cuda`");
  Config c;
  const std::string layout = o.text("layout", "2d");
  OPTIMUS_CHECK(layout == "1d" || layout == "2d", "--layout must be 1d or 2d, got '", layout, "'");
  c.two_d = layout == "2d";
  c.shape = block_shape_option(o, 8);
  c.block = cli::arch_of(o);
  c.layers = o.integer("layers", 1);
  c.warmup = static_cast<int>(o.integer("warmup", 1));
  c.iters = static_cast<int>(o.integer("iters", 3));
  c.trace = o.text("trace", "");
  OPTIMUS_CHECK(c.trace.empty() || c.two_d,
                "--trace records the 2D layout's SUMMA; it has no meaning with --layout 1d");
  const std::string check = o.text("check", "auto");
  c.check = check == "on" || (check == "auto" && c.shape.tokens() * c.shape.hidden <= (1 << 18));
  const DType dtype = parse_dtype(o.text("dtype", "f32"));
  OPTIMUS_CHECK(dtype != DType::bf16, "scaling runs f32 or f64 on the CPU (bf16 GEMMs: --gemm bf16)");
  const std::string gemm = o.text("gemm", "f32");
  OPTIMUS_CHECK(gemm == "f32" || gemm == "bf16", "--gemm must be f32 or bf16 (the CPU has no TF32), got '", gemm,
                "'");
  OPTIMUS_CHECK(gemm == "f32" || dtype == DType::f32, "--gemm bf16 is mixed precision of f32 layers: it needs "
                "--dtype f32, got ", name_of(dtype));
  c.math = gemm == "bf16" ? ops::GemmMath::bf16 : ops::GemmMath::f32;
  const std::size_t elem = size_of(dtype), low = c.math == ops::GemmMath::bf16 ? 2 : elem;
  const int p = world.size(), q = static_cast<int>(std::lround(std::sqrt(p)));

  const ScalingMeasured m = dtype == DType::f64 ? run<double>(world, c) : run<float>(world, c);
  const std::uint64_t predicted = c.two_d ? predicted_bytes_2d(c.shape, q, elem, c.layers, low)
                                          : predicted_bytes_1d(c.shape, p, elem, c.layers);
  const double predicted_act =
      static_cast<double>(c.layers) * (c.two_d ? predicted_activation_bytes_2d(c.shape, q, elem, low)
                                               : predicted_activation_bytes_1d(c.shape, p, elem, low));
  const double flops = block_flops(c.shape, c.layers);
  // Largest batch whose activations (linear in b) and parameters fit the per-rank budget: 0 where the parameters alone
  // fill it.
  const double budget = o.real("budget-gib", 80.0) * (1u << 30);
  const double per_sample = m.activations / static_cast<double>(c.shape.batch);
  const double max_batch =
      per_sample > 0 ? std::floor(std::max(0.0, budget - m.parameters) / per_sample) : 0;

  Report report({{"layout", 6}, {"p", 3}, {"q", 2}, {"b", 4}, {"s", 5}, {"h", 5}, {"heads", 5}, {"ffn", 5},
                 {"layers", 6}, {"dtype", 5}, {"gemm", 4}, {"step_ms", 10}, {"blocking_ms", 11}, {"overlap", 7},
                 {"gemm_ms", 9}, {"exposed_ms", 10}, {"GFLOP/s/rank", 12}, {"recv_B/rank", 12},
                 {"predicted_B", 12}, {"equal", 5}, {"msgs/rank", 9}, {"act_B/rank", 12}, {"act_pred_B", 12},
                 {"param_B/rank", 12}, {"peak_B/rank", 12}, {"max_b@budget", 12}, {"#wrong", 6}});
  report.header(format("optimus-bench scaling: %s layout on %d ranks (%s), warmup %d, iters %d", layout.c_str(), p,
                       world.backend().c_str(), c.warmup, c.iters));
  report.header("step: forward + backward of the blocks, median over iters of the max over ranks; bytes and messages "
                "received per rank in one step from the counters; act_B: bytes saved for backward per rank");
  report.header("2d: step_ms with overlapped SUMMA (the default), blocking_ms with blocking SUMMA; overlap: SUMMA "
                "communication hidden / communication; gemm_ms, exposed_ms: per step, max over ranks, SUMMA's GEMMs "
                "and its waits for communication (overlapped); the rest of step_ms is element-wise work, the layers' "
                "small collectives and idle");
  report.row({layout, format("%d", p), c.two_d ? format("%d", q) : "-", format("%lld", (long long)c.shape.batch),
              format("%lld", (long long)c.shape.seq), format("%lld", (long long)c.shape.hidden),
              format("%lld", (long long)c.shape.heads), format("%lld", (long long)c.shape.ffn),
              format("%lld", (long long)c.layers), std::string(name_of(dtype)), gemm, format("%.3f", m.seconds * 1e3),
              m.overlap ? format("%.3f", m.overlap->blocking_s * 1e3) : "-",
              m.overlap ? format("%.2f", m.overlap->fraction) : "-",
              m.overlap ? format("%.3f", m.overlap->compute_s * 1e3) : "-",
              m.overlap ? format("%.3f", m.overlap->exposed_s * 1e3) : "-",
              format("%.3f", flops / m.seconds / p / 1e9), format("%llu", (unsigned long long)m.bytes),
              format("%llu", (unsigned long long)predicted), m.bytes == predicted ? "yes" : "NO",
              format("%llu", (unsigned long long)m.messages), format("%.0f", m.activations),
              format("%.0f", predicted_act), format("%.0f", m.parameters), format("%.0f", m.peak),
              format("%.0f", max_batch), m.wrong < 0 ? "n/a" : format("%lld", (long long)m.wrong)});
  const bool ok = m.bytes == predicted && m.activations == predicted_act && m.wrong <= 0;
  report.footer(format("bytes equal prediction: %s; activation bytes equal prediction: %s; budget %.0f GiB per rank",
                       m.bytes == predicted ? "yes" : "NO", m.activations == predicted_act ? "yes" : "NO",
                       budget / (1u << 30)));
  if (world.rank() == 0) {
    report.print(stdout);
    if (o.has("json")) report.write_json(o.text("json", ""), "scaling");
  }
  return ok ? 0 : 1;
}

}  // namespace optimus::bench

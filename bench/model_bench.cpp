// optimus-bench calibrate: measures this machine's broadcast and all-reduce cost (alpha: seconds per message,
// beta: seconds per byte counted by the traffic convention), the local GEMM rate and the element-wise rate (GELU and an
// axpby, elements per second), and writes them as JSON (optimus-plan --calibration reads it).
// optimus-bench model: an alpha-beta model of one training step of transformer blocks, 1D vs 2D, for p ranks
// on a cluster with NVLink inside nodes of `node` GPUs and InfiniBand between them (or with the calibration
// of this machine), from the exact traffic formulas of traffic_model.hpp.
#include <chrono>
#include <cmath>
#include <vector>

#include "commands.hpp"
#include "bench_options.hpp"
#include "block_model.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/output_file.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/plan/calibrate.hpp"
#include "optimus/plan/cluster.hpp"
#include "report.hpp"
#include "timing.hpp"
#include "traffic_model.hpp"

namespace optimus::bench {

int run_calibrate(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("calibrate"));
  world.set_timeout(o.timeout());  // --timeout: the watchdog
  OPTIMUS_CHECK(world.size() >= 2, "calibrate needs at least 2 ranks to measure communication, got ", world.size());
  const std::string json = plan::to_json(plan::calibrate(world, static_cast<int>(o.integer("iters", 5))));
  if (world.rank() == 0) {
    std::printf("%s", json.c_str());
    if (o.has("json")) optimus::write_file(o.text("json", ""), json);
  }
  return 0;
}

namespace {

struct Links {
  double intra_bw, inter_bw;        // bytes per second per rank
  double intra_alpha, inter_alpha;  // seconds per message
  double flops;                     // per rank, achieved
  int node;                         // ranks per node
};

// Seconds of one step per rank: compute + exposed communication (no overlap).
struct Prediction {
  double compute, comm, total;
};

Prediction predict_1d(const BlockShape& s, std::int64_t layers, int p, std::size_t elem, const Links& l, double flops) {
  const double bytes = static_cast<double>(predicted_bytes_1d(s, p, elem, layers));
  const bool inter = p > l.node;  // the ring crosses nodes: its slowest link sets the pace
  const double messages = 4.0 * static_cast<double>(layers) * 2.0 * (p - 1);  // ring steps
  const double comm = bytes / (inter ? l.inter_bw : l.intra_bw) + messages * (inter ? l.inter_alpha : l.intra_alpha);
  const double compute = flops / p / l.flops;
  return {compute, comm, compute + comm};
}

Prediction predict_2d(const BlockShape& s, std::int64_t layers, int q, std::size_t elem, const Links& l, double flops) {
  // Rows of the grid inside a node when they fit (q <= node): row traffic on NVLink, column traffic between nodes.
  const double total = static_cast<double>(predicted_bytes_2d(s, q, elem, layers));
  const double h = static_cast<double>(s.hidden), f = static_cast<double>(s.ffn);
  const double qkv = static_cast<double>(s.qkv_width), fc = static_cast<double>(s.fc_width);
  const double qq = q;
  // Column traffic: the weights' share of the SUMMA volume (3 (q-1)/q^2 of in*out per Linear2D).
  const double weights = 3.0 * (qq - 1) / (qq * qq) * (h * qkv + h * h + h * fc + f * h) *
                         static_cast<double>(elem) * static_cast<double>(layers);
  const double rows = total - weights;
  const int p = q * q;
  const bool columns_inter = p > l.node;
  const bool rows_inter = q > l.node;
  const double messages = static_cast<double>(layers) * (4 * 3 * 2.0 * (q - 1) + 10.0 * (q - 1));
  const double comm = rows / (rows_inter ? l.inter_bw : l.intra_bw) +
                      weights / (columns_inter ? l.inter_bw : l.intra_bw) +
                      messages * (columns_inter ? l.inter_alpha : l.intra_alpha);
  const double compute = flops / p / l.flops;
  return {compute, comm, compute + comm};
}

}  // namespace

int run_model(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("model"));
  world.set_timeout(o.timeout());  // --timeout: the watchdog
  GptConfig g;  // the blocks (--arch) of the shape's widths
  g.hidden = o.integer("h", 8192);
  g.heads = o.integer("heads", 64);
  g.block = block_option(o);
  g.ffn = o.integer("ffn", g.block == BlockConfig{} ? 4 * g.hidden : ((8 * g.hidden + 2) / 3 + 255) / 256 * 256);
  const BlockShape s = BlockShape::of(g, o.integer("b", 16), o.integer("s", 2048));
  const std::int64_t layers = o.integer("layers", 1);
  const auto elem = static_cast<std::size_t>(o.integer("elem-bytes", 2));  // bf16 activations and weights
  Links l{o.real("nvlink-gbs", 450) * 1e9, o.real("ib-gbs", 50) * 1e9, o.real("nvlink-alpha-us", 5) * 1e-6,
          o.real("ib-alpha-us", 10) * 1e-6, o.real("tflops", 400) * 1e12, static_cast<int>(o.integer("node", 8))};
  std::string source = "NVLink 4 (450 GB/s per GPU) inside nodes of 8, InfiniBand NDR (50 GB/s per GPU) between";
  if (o.has("calibration")) {
    // Read and validated as optimus-plan reads it (its rates finite and positive); one link, alpha-beta.
    const plan::Cluster measured = plan::read_calibration(o.text("calibration", ""), 1, 1, 1);
    l.intra_bw = l.inter_bw = measured.intra.bandwidth;
    l.intra_alpha = l.inter_alpha = measured.intra.latency;
    l.flops = measured.gemm_flops;
    l.node = 1 << 30;
    source = "calibration " + o.text("calibration", "");
  }
  const double flops = block_flops(s, layers);
  Report report({{"p", 4}, {"q", 3}, {"1D_compute_ms", 13}, {"1D_comm_ms", 11}, {"1D_step_ms", 11},
                 {"2D_compute_ms", 13}, {"2D_comm_ms", 11}, {"2D_step_ms", 11}, {"1D_B/rank", 12}, {"2D_B/rank", 12},
                 {"speedup_2D", 10}});
  report.header(format("optimus-bench model: %s blocks b=%lld s=%lld h=%lld heads=%lld (%lld key/value) ffn=%lld "
                       "layers=%lld, %zu-byte elements",
                       family_name(g.block), (long long)s.batch, (long long)s.seq, (long long)s.hidden,
                       (long long)s.heads, (long long)g.kv_heads(), (long long)s.ffn, (long long)layers, elem));
  report.header("links: " + source + format("; compute %.4g TFLOP/s achieved per rank; no overlap of communication",
                                            l.flops / 1e12));
  for (const std::int64_t p64 : o.integers("ps", "4,16,64,256")) {
    const int p = static_cast<int>(p64);
    const int q = static_cast<int>(std::lround(std::sqrt(p)));
    OPTIMUS_CHECK(q * q == p, "model: p = ", p, " is not a square");
    const Prediction one = predict_1d(s, layers, p, elem, l, flops), two = predict_2d(s, layers, q, elem, l, flops);
    report.row({format("%d", p), format("%d", q), format("%.3f", one.compute * 1e3), format("%.3f", one.comm * 1e3),
                format("%.3f", one.total * 1e3), format("%.3f", two.compute * 1e3), format("%.3f", two.comm * 1e3),
                format("%.3f", two.total * 1e3),
                format("%llu", (unsigned long long)predicted_bytes_1d(s, p, elem, layers)),
                format("%llu", (unsigned long long)predicted_bytes_2d(s, q, elem, layers)),
                format("%.2f", one.total / two.total)});
  }
  if (world.rank() == 0) {
    report.print(stdout);
    if (o.has("json")) report.write_json(o.text("json", ""), "model");
  }
  return 0;
}

}  // namespace optimus::bench

// optimus-bench calibrate: measures this machine's broadcast and all-reduce cost (alpha: seconds per message,
// beta: seconds per byte counted by the traffic convention), the local GEMM rate and the element-wise rate (GELU and an
// axpby, elements per second), and writes them as JSON (optimus-plan --calibration reads it).
// optimus-bench model: an alpha-beta model of one training step of transformer blocks, 1D vs 2D, for p ranks
// on a cluster with NVLink inside nodes of `node` GPUs and InfiniBand between them (or with the calibration
// of this machine), from the exact traffic formulas of traffic_model.hpp.
#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <cmath>
#include <vector>

#include "commands.hpp"
#include "bench_options.hpp"
#include "block_model.hpp"
#include "optimus/programs/arch_options.hpp"
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

// Seconds of one step per rank: compute + exposed communication (no overlap).
struct Prediction {
  double compute, comm, total;
};

// The cluster's links and GEMM rate (cluster.gemm_flops); a group's link across nodes as plan::group_link gives it.
Prediction predict_1d(const BlockShape& s, std::int64_t layers, int p, std::size_t elem, const plan::Cluster& c,
                      double flops) {
  const double bytes = static_cast<double>(predicted_bytes_1d(s, p, elem, layers));
  const plan::Link ring = plan::group_link(c, p, 1).link;  // the ring's slowest link sets the pace
  const double messages = 4.0 * static_cast<double>(layers) * 2.0 * (p - 1);  // ring steps
  const double comm = bytes / ring.bandwidth + messages * ring.latency;
  const double compute = flops / p / c.gemm_flops;
  return {compute, comm, compute + comm};
}

Prediction predict_2d(const BlockShape& s, std::int64_t layers, int q, std::size_t elem, const plan::Cluster& c,
                      double flops) {
  // Rows of the grid are consecutive ranks (inside a node when q <= its GPUs), columns q apart.
  const double total = static_cast<double>(predicted_bytes_2d(s, q, elem, layers));
  const double h = static_cast<double>(s.hidden), f = static_cast<double>(s.ffn);
  const double qkv = static_cast<double>(s.qkv_width), fc = static_cast<double>(s.fc_width);
  const double qq = q;
  // Column traffic: the weights' share of the SUMMA volume (3 (q-1)/q^2 of in*out per Linear2D).
  const double weights = 3.0 * (qq - 1) / (qq * qq) * (h * qkv + h * h + h * fc + f * h) *
                         static_cast<double>(elem) * static_cast<double>(layers);
  const double rows = total - weights;
  const plan::Link row = plan::group_link(c, q, 1).link, column = plan::group_link(c, q, q).link;
  // Latency (docs/isoefficiency.md): each of the 12 SUMMA products runs q steps of two collectives (a broadcast, or a
  // broadcast and a reduce) along grid rows or columns, binomial trees of ceil(log2 q) rounds; each norm's row
  // all-reduces (2 forward for LayerNorm, 1 for RMSNorm; 1 backward) by recursive doubling, its parameters' gathers
  // and reduce-scatters (5 for LayerNorm, 3 for RMSNorm) and the biases' (2 per linear) as rings of q - 1 steps.
  const double depth = q > 1 ? std::ceil(std::log2(static_cast<double>(q))) : 0.0;
  const double norm_rounds = (s.centered ? 3.0 : 2.0) * depth + (s.centered ? 5.0 : 3.0) * (q - 1);
  const double messages = static_cast<double>(layers) *
                          (12 * 2.0 * q * depth + 2 * norm_rounds + (s.bias ? 8.0 * (q - 1) : 0.0));
  const double comm = rows / row.bandwidth + weights / column.bandwidth + messages * column.latency;
  const double compute = flops / (q * q) / c.gemm_flops;
  return {compute, comm, compute + comm};
}

// The model's parallel efficiency of p ranks on `s` (its batch b): E = T(1) / (p T(p)), T(1) the step's compute alone
// on one rank, T(p) compute / p plus the exposed communication — docs/isoefficiency.md's E_1D and E_2D.
double efficiency(const BlockShape& s, std::int64_t layers, bool two_d, int p, std::size_t elem,
                  const plan::Cluster& l) {
  const double flops = block_flops(s, layers);
  const int q = static_cast<int>(std::lround(std::sqrt(p)));
  const Prediction t = two_d ? predict_2d(s, layers, q, elem, l, flops) : predict_1d(s, layers, p, elem, l, flops);
  return flops / l.gemm_flops / (p * t.total);
}

// The isoefficiency batch: the least b at which p ranks reach efficiency `target` (nullopt where no batch does: the
// bandwidth terms grow with b as the compute does, so E has a limit below 1, E_max, evaluated at the largest batch
// whose byte counts stay well inside 64 bits, 2^58 / (s w e p layers) with w the widest activation, at most 2^30).
struct Iso {
  std::optional<std::int64_t> batch;
  double e_max;
};
Iso iso_batch(BlockShape s, std::int64_t layers, bool two_d, int p, std::size_t elem, const plan::Cluster& l,
              double target) {
  const auto at = [&](std::int64_t b) {
    s.batch = b;
    return efficiency(s, layers, two_d, p, elem, l);
  };
  const std::int64_t widest = std::max({s.hidden, s.ffn, s.qkv_width, s.fc_width});
  const std::int64_t most = std::max<std::int64_t>(
      1, std::min<std::int64_t>(std::int64_t{1} << 30, (std::int64_t{1} << 58) / (s.seq * widest *
                                                                                   static_cast<std::int64_t>(elem) *
                                                                                   p * layers)));
  Iso out{.batch = std::nullopt, .e_max = at(most)};
  if (out.e_max < target) return out;
  std::int64_t lo = 0, hi = 1;  // E(lo) < target <= E(hi) (lo = 0: none below)
  while (at(hi) < target) lo = hi, hi *= 2;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (at(mid) >= target ? hi : lo) = mid;
  }
  out.batch = hi;
  return out;
}

// The least-squares exponent x of b ~ p^x over the points (p, b); nullopt with fewer than two.
std::optional<double> fitted_exponent(const std::vector<std::pair<double, double>>& points) {
  if (points.size() < 2) return std::nullopt;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [p, b] : points) {
    const double x = std::log(p), y = std::log(b);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double n = static_cast<double>(points.size());
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

// The modelled blocks and cluster, from the options: what every row reads.
struct Modelled {
  GptConfig g;                // the blocks (--arch) of the shape's widths
  BlockShape s;
  std::int64_t layers;
  std::size_t elem;           // bytes per element
  plan::Cluster l;            // the links, the node and the GEMM rate: what this model reads
  std::string source;         // where the links come from, for the header
  std::optional<double> iso;  // --iso: the efficiency whose batch is sought
};

// The blocks and the cluster of the options (or of --calibration, read and validated as optimus-plan reads it).
Modelled modelled_of(const cli::Options& o) {
  Modelled m;
  m.g.hidden = o.integer("h", 8192);
  m.g.heads = o.integer("heads", 64);
  m.g.block = cli::arch_of(o);
  m.g.ffn = o.integer("ffn", m.g.block == BlockConfig{} ? 4 * m.g.hidden : llama_ffn(m.g.hidden, 256));
  m.s = BlockShape::of(m.g, o.integer("b", 16), o.integer("s", 2048));
  m.layers = o.integer("layers", 1);
  m.elem = static_cast<std::size_t>(o.integer("elem-bytes", 2));  // bf16 activations and weights
  m.l.gpus_per_node = static_cast<int>(o.integer("node", 8));
  m.l.intra = {.bandwidth = o.real("nvlink-gbs", 450) * 1e9, .latency = o.real("nvlink-alpha-us", 5) * 1e-6};
  m.l.inter = {.bandwidth = o.real("ib-gbs", 50) * 1e9, .latency = o.real("ib-alpha-us", 10) * 1e-6};
  m.l.gemm_flops = o.real("tflops", 400) * 1e12;
  m.source = "NVLink 4 (450 GB/s per GPU) inside nodes of 8, InfiniBand NDR (50 GB/s per GPU) between";
  if (o.has("calibration")) {
    // Read and validated as optimus-plan reads it (its rates finite and positive); one link, alpha-beta.
    m.l = plan::read_calibration(o.text("calibration", ""), 1, 1, 1);
    m.l.gpus_per_node = 1 << 30;
    m.source = "calibration " + o.text("calibration", "");
  }
  m.iso = o.has("iso") ? std::optional(o.real("iso", 0.5)) : std::nullopt;
  return m;
}

// The report's columns (the isoefficiency's with --iso) and header lines.
Report model_report(const Modelled& m) {
  std::vector<Column> columns = {{"p", 4},           {"q", 3},           {"1D_compute_ms", 13}, {"1D_comm_ms", 11},
                                 {"1D_step_ms", 11}, {"2D_compute_ms", 13}, {"2D_comm_ms", 11}, {"2D_step_ms", 11},
                                 {"1D_B/rank", 12},  {"2D_B/rank", 12},  {"speedup_2D", 10}};
  if (m.iso) {
    for (Column c : std::vector<Column>{{"1D_E", 6}, {"2D_E", 6}, {"1D_iso_b", 10}, {"2D_iso_b", 10},
                                        {"1D_E_max", 9}, {"2D_E_max", 9}}) {
      columns.push_back(c);
    }
  }
  Report report(std::move(columns));
  const BlockShape& s = m.s;
  report.header(format("optimus-bench model: %s blocks b=%lld s=%lld h=%lld heads=%lld (%lld key/value) ffn=%lld "
                       "layers=%lld, %zu-byte elements",
                       family_name(m.g.block), (long long)s.batch, (long long)s.seq, (long long)s.hidden,
                       (long long)s.heads, (long long)m.g.kv_heads(), (long long)s.ffn, (long long)m.layers, m.elem));
  report.header("links: " + m.source + format("; compute %.4g TFLOP/s achieved per rank; no overlap of communication",
                                              m.l.gemm_flops / 1e12));
  if (m.iso) {
    report.header(format("isoefficiency at E = %.2f: E = T(1) / (p T(p)) at this batch; iso_b: the least batch (of this "
                         "shape) at which p ranks reach E, '-' where none does; E_max: the limit as the batch grows "
                         "(docs/isoefficiency.md)", *m.iso));
  }
  return report;
}

// The row of p = q^2 ranks without the isoefficiency's columns: 1D's and 2D's step times, bytes and the speedup;
// `flops`: the step's.
std::vector<std::string> row_of(const Modelled& m, int p, int q, double flops) {
  const BlockShape& s = m.s;
  const Prediction one = predict_1d(s, m.layers, p, m.elem, m.l, flops);
  const Prediction two = predict_2d(s, m.layers, q, m.elem, m.l, flops);
  return {format("%d", p), format("%d", q), format("%.3f", one.compute * 1e3), format("%.3f", one.comm * 1e3),
          format("%.3f", one.total * 1e3), format("%.3f", two.compute * 1e3), format("%.3f", two.comm * 1e3),
          format("%.3f", two.total * 1e3),
          format("%llu", (unsigned long long)predicted_bytes_1d(s, p, m.elem, m.layers)),
          format("%llu", (unsigned long long)predicted_bytes_2d(s, q, m.elem, m.layers)),
          format("%.2f", one.total / two.total)};
}

// The (p, iso_b) points where p > 1 ranks reach the --iso efficiency, 1D and 2D: what the exponents are fitted to.
struct IsoPoints {
  std::vector<std::pair<double, double>> one_d, two_d;
};

// The isoefficiency's columns of p ranks appended to `values`, and their points (p > 1) to `points`.
void add_iso(std::vector<std::string>& values, const Modelled& m, int p, IsoPoints& points) {
  const Iso a = iso_batch(m.s, m.layers, false, p, m.elem, m.l, *m.iso);
  const Iso b = iso_batch(m.s, m.layers, true, p, m.elem, m.l, *m.iso);
  const auto batch = [](const Iso& i) { return i.batch ? format("%lld", (long long)*i.batch) : std::string("-"); };
  values.insert(values.end(), {format("%.3f", efficiency(m.s, m.layers, false, p, m.elem, m.l)),
                               format("%.3f", efficiency(m.s, m.layers, true, p, m.elem, m.l)), batch(a), batch(b),
                               format("%.3f", a.e_max), format("%.3f", b.e_max)});
  if (p > 1 && a.batch) points.one_d.emplace_back(p, static_cast<double>(*a.batch));
  if (p > 1 && b.batch) points.two_d.emplace_back(p, static_cast<double>(*b.batch));
}

}  // namespace

int run_model(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("model"));
  world.set_timeout(o.timeout());  // --timeout: the watchdog
  const Modelled m = modelled_of(o);
  const double flops = block_flops(m.s, m.layers);
  Report report = model_report(m);
  IsoPoints points;  // (p, iso_b) where reached, p > 1
  for (const std::int64_t p64 : o.integers("ps", "4,16,64,256")) {
    const int p = static_cast<int>(p64);
    const int q = static_cast<int>(std::lround(std::sqrt(p)));
    OPTIMUS_CHECK(q * q == p, "model: p = ", p, " is not a square");
    std::vector<std::string> values = row_of(m, p, q, flops);
    if (m.iso) add_iso(values, m, p, points);
    report.row(std::move(values));
  }
  if (m.iso) {
    const auto exponent = [](const std::optional<double>& x) {
      return x ? format("%.2f", *x) : std::string("- (fewer than two p > 1 reach E)");
    };
    report.footer(format("isoefficiency exponent (least squares of log iso_b on log p, p > 1): 1D %s, 2D %s",
                         exponent(fitted_exponent(points.one_d)).c_str(),
                         exponent(fitted_exponent(points.two_d)).c_str()));
  }
  if (world.rank() == 0) {
    report.print(stdout);
    if (o.has("json")) report.write_json(o.text("json", ""), "model");
  }
  return 0;
}

}  // namespace optimus::bench

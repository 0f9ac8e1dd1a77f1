// optimus-bench layer and optimus-bench gpt: transformer blocks (layer) or a small GPT (gpt, with embedding,
// ln_f and the vocabulary-parallel LM head), forward + backward, on grids that run inside this process — q = 1 and
// in-process q = 2 (q^2 threads) — on the CPU, on the simulated device (--device sim) or on one GPU (--device
// cuda): every rank's grid placed on the one device (RankDevice::grid). One row per q: step time (max over ranks),
// model TFLOP/s, the GEMM peak measured by this run (cuBLASLt bf16 n^3 on the GPU, f32 n^3 on the CPU and the
// simulated device) and the fraction of it, peak memory per rank, allocations made by the steady-state steps (must
// be 0 on an accelerator), bytes copied between host and device per step (exact on the simulated device), and
// #wrong against the fp64 reference. Parameters, gradients, activations and optimizer state are f32; --gemm picks how
// the GEMMs compute (f32, TF32, or bf16 operands with f32 accumulation).
#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "block_model.hpp"
#include "optimus/programs/arch_options.hpp"
#include "commands.hpp"
#include "bench_options.hpp"
#include "cpu_peak.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/core/processor.hpp"
#include "optimus/programs/device_choice.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/layers/block.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/reference/compare.hpp"
#include "optimus/sim/runtime.hpp"
#include "report.hpp"
#include "step_gemms.hpp"
#include "timing.hpp"

namespace optimus::bench {
namespace {

enum class Workload { blocks, gpt };

struct LayerSettings {
  Workload workload;
  BlockShape shape;
  BlockConfig block;  // --arch
  std::int64_t layers, vocab;
  Device device;
  bool check;
  ops::GemmMath math;
  double dropout;  // --dropout: the blocks' (and the GPT's embedding) dropout probability, training step 1
  int warmup, iters;
};

// The blocks' configuration with the bench's dropout.
GptConfig blocks_config(const LayerSettings& s) {
  GptConfig config = block_config(s.shape, s.block, s.layers);
  config.dropout = s.dropout;
  return config;
}

GptConfig gpt_config(const LayerSettings& s) {
  GptConfig config = blocks_config(s);
  config.vocab = s.vocab;
  return config;
}

// Model FLOPs of one step: the blocks, and for the GPT the LM head's logits (2 N h V forward, twice that backward).
double step_flops(const LayerSettings& s) {
  const double head = s.workload == Workload::gpt ? 3.0 * 2.0 * static_cast<double>(s.shape.tokens()) *
                                                        static_cast<double>(s.shape.hidden * s.vocab)
                                                  : 0.0;
  return block_flops(s.shape, s.layers) + head;
}

// One rank's timed work and its check against the fp64 reference (collective over the grid).
class Work {
 public:
  virtual ~Work() = default;
  virtual void step() = 0;
  // Elements (and losses) outside `tol` of the reference.
  virtual std::int64_t wrong(double tol) = 0;
};

// `layers` blocks on random input and output gradient; checks the output and the input gradient.
class BlocksWork final : public Work {
 public:
  BlocksWork(const Grid& grid, const LayerSettings& s)
      : s_(s), x_(grid, s.shape.tokens(), s.shape.hidden), dy_(grid, s.shape.tokens(), s.shape.hidden),
        out_(grid, s.shape.tokens(), s.shape.hidden), din_(grid, s.shape.tokens(), s.shape.hidden) {
    const GptConfig config = blocks_config(s);
    for (std::int64_t l = 0; l < s.layers; ++l) {
      blocks_.push_back(std::make_unique<TransformerBlock2D<float>>(grid, config, l));
      std::vector<ParameterRef<float>> refs;
      blocks_.back()->parameters(refs);
      for (const ParameterRef<float>& r : refs) init_parameter(r, config, grid.device());
    }
    x_.fill_random(1);
    dy_.fill_random(2);
  }
  void step() override {
    DistMatrix<float> a = x_.clone();
    std::vector<TransformerBlock2D<float>::Context> saved(blocks_.size());
    const Pass pass = Pass::train(1, 0);
    for (std::size_t l = 0; l < blocks_.size(); ++l) a = blocks_[l]->forward(a, s_.shape.seq, pass, saved[l]);
    DistMatrix<float> d = dy_.clone();
    for (std::size_t l = blocks_.size(); l-- > 0;) d = blocks_[l]->backward(std::move(saved[l]), d);
    out_ = std::move(a);
    din_ = std::move(d);
  }
  std::int64_t wrong(double tol) override {
    const auto [y_ref, dx_ref] =
        reference_blocks(s_.shape, s_.block, s_.layers, s_.dropout, x_.to_global().cast<double>(),
                         dy_.to_global().cast<double>());
    const reference::Matrix y = out_.to_global().cast<double>(), dx = din_.to_global().cast<double>();
    return reference::compare_relative(y, y_ref, tol).wrong + reference::compare_relative(dx, dx_ref, tol).wrong;
  }

 private:
  const LayerSettings& s_;
  std::vector<std::unique_ptr<TransformerBlock2D<float>>> blocks_;
  DistMatrix<float> x_, dy_, out_, din_;
};

// A GPT (its initialization rule) on fixed token ids; checks the loss and every parameter's gradient.
class GptWork final : public Work {
 public:
  GptWork(const Grid& grid, const LayerSettings& s) : s_(s), config_(gpt_config(s)), model_(grid, config_) {
    for (std::int64_t t = 0; t < s.shape.tokens(); ++t) {
      tokens_.push_back(static_cast<int>((7 * t + 3) % s.vocab));
      targets_.push_back(static_cast<int>((5 * t + 1) % s.vocab));
    }
  }
  void step() override {
    model_.zero_grad();
    loss_ = model_.train_step(tokens_, targets_, s_.shape.batch, 1);
  }
  std::int64_t wrong(double tol) override {
    reference::Parameters p = reference::gpt_init(config_);
    for (auto& [name, m] : p) m = m.cast<float>().cast<double>();  // what the f32 model holds
    const reference::GptResult r =
        reference::gpt_forward_backward(config_, p, tokens_, targets_, s_.shape.batch, 1);
    std::int64_t wrong = std::abs(loss_ - r.loss) <= tol * std::abs(r.loss) ? 0 : 1;
    for (const auto& [name, grad] : model_.gather(true)) {
      wrong += reference::compare_relative(grad, r.grads.at(name), tol).wrong;
    }
    return wrong;
  }

 private:
  const LayerSettings& s_;
  GptConfig config_;
  Gpt2D<float> model_;
  std::vector<int> tokens_, targets_;
  double loss_ = 0;
};

struct RankResult {
  double seconds = 0;      // the step, max over ranks (same on every rank)
  double peak_bytes = 0;   // this rank's peak: device memory in use (accelerator) or tracked tensors (CPU)
  double allocations = 0;  // raw allocations of the rank's memory pool and page-locked buffers in the timed steps
  double staging = 0;      // raw allocations of the rank's in-process staging area in the timed steps
  double copied = -1;      // bytes copied host <-> device by the whole grid in the timed steps (simulated device)
  std::int64_t wrong = -1;
  // Where this rank's timed steps went, as fractions of its own mean step (the CPU only: its operations are timed
  // where they run): kBreakdownKinds in order, then the rest (copies, allocation, collectives outside SUMMA, waiting
  // for other ranks). The t_* columns.
  std::optional<std::array<double, 5>> breakdown;
};

// GEMMs, element-wise work, the fused attention, waiting for SUMMA's transfers.
constexpr SpanKind kBreakdownKinds[] = {SpanKind::gemm, SpanKind::elementwise, SpanKind::attention, SpanKind::comm_wait};

// The breakdown of `timeline`'s spans over `seconds` (the timed steps' wall time on this rank).
std::array<double, 5> breakdown_of(const Timeline& timeline, double seconds) {
  std::array<double, 5> shares{};
  shares.back() = 1.0;
  for (std::size_t k = 0; k < std::size(kBreakdownKinds); ++k) {
    shares[k] = timeline.total_us(kBreakdownKinds[k]) * 1e-6 / seconds;
    shares.back() -= shares[k];
  }
  return shares;
}

// Bytes copied between host and device so far, on the simulated device; -1 elsewhere (not counted).
double host_device_bytes(DeviceRuntime* device) {
  auto* sim = dynamic_cast<sim::Runtime*>(device);
  if (sim == nullptr) return -1;
  const sim::Traffic t = sim->traffic();
  return static_cast<double>(t.host_to_device + t.device_to_host);
}

// One rank of a q x q grid in this process, on the CPU (device null) or on `device` (shared by the q^2 ranks): builds
// the work, times the steps, checks the result.
RankResult run_rank(Communicator& world, int q, const LayerSettings& s, DeviceRuntime* device) {
  // The timing's own collectives on host scalars, split off before the grid stages the world's on the device: they
  // move nothing through the device (its counters and allocations are the steps').
  const std::unique_ptr<Communicator> timing = world.split(0, world.rank());
  std::optional<RankDevice> rank;
  if (device != nullptr) rank.emplace(*device, s.math);
  // On the CPU the timeline takes the CPU's operations by kind and SUMMA's waits (cleared after the warm-up).
  Timeline timeline;
  const Grid grid = (rank ? rank->grid(world, q) : Grid::create(world, q))
                        .with({.overlap = true, .gemm_math = s.math, .check_finite = false,
                               .timeline = device == nullptr ? &timeline : nullptr});
  auto synchronize = [&] {
    if (rank) rank->stream().synchronize();
  };
  // The rank's tensors and page-locked buffers (what a step allocates), and its in-process staging area.
  auto raw_allocations = [&] { return rank ? static_cast<double>(rank->raw_allocations().memory) : 0.0; };
  auto staging_allocations = [&] { return rank ? static_cast<double>(rank->raw_allocations().staging) : 0.0; };
  std::unique_ptr<Work> work;
  if (s.workload == Workload::gpt) {
    work = std::make_unique<GptWork>(grid, s);
  } else {
    work = std::make_unique<BlocksWork>(grid, s);
  }
  auto step = [&] {
    work->step();
    synchronize();
  };
  for (int w = 0; w < s.warmup; ++w) step();
  timeline.clear();
  grid.memory().reset_peaks();
  const double before = raw_allocations(), staging_before = staging_allocations();
  // The device's copy counters, read by every rank between two barriers: the timed steps' copies, nobody else's.
  auto copied = [&] {
    timing->barrier();
    const double bytes = host_device_bytes(device);
    timing->barrier();
    return bytes;
  };
  const double copied_before = copied();
  RankResult r;
  const auto started = std::chrono::steady_clock::now();
  r.seconds = time_max_over_ranks(*timing, 0, s.iters, step);
  if (device == nullptr) {
    r.breakdown = breakdown_of(timeline, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  if (copied_before >= 0) r.copied = copied() - copied_before;
  r.allocations = raw_allocations() - before;
  r.staging = staging_allocations() - staging_before;
  r.peak_bytes = rank ? static_cast<double>(rank->memory().allocator().stats().peak_in_use)
                      : static_cast<double>(grid.memory().peak_total());
  if (s.check) r.wrong = work->wrong(s.math == ops::GemmMath::f32 ? 1e-4 : 2e-2);
  return r;
}

// Seconds per n x n x n product of E matrices (E: float or bf16, as `precision` says) through the GEMM engine of
// `rank`'s device: one product to warm up, then the mean of three.
template <class E>
double seconds_per_gemm(RankDevice& rank, GemmPrecision precision, std::int64_t n) {
  const MemoryTag tag{.device = &rank.memory()};  // untracked workspace
  const std::vector<E> half(static_cast<std::size_t>(n * n), E(0.5f));
  Tensor<E> a = upload(half.data(), Shape{n, n}, tag), b = upload(half.data(), Shape{n, n}, tag);
  Tensor<E> c(Shape{n, n}, tag);
  const GemmCall call{.precision = precision, .m = n, .n = n, .k = n, .a = a.data(), .lda = n, .b = b.data(),
                      .ldb = n, .c = c.data(), .ldc = n};
  rank.gemm().run(call, rank.stream());
  rank.stream().synchronize();
  const int reps = 3;
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < reps; ++k) rank.gemm().run(call, rank.stream());
  rank.stream().synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// The GEMM peak of this machine as this run measures it, and what it is: bf16 n^3 through the GEMM engine on a GPU,
// f32 n^3 through it on the simulated device (the CPU GEMM behind it, on this thread's core), the CPU GEMM backend's
// f32 n^3 on the CPU.
std::pair<Peak, std::string> gemm_peak(DeviceRuntime* device, std::int64_t size) {
  const double flops = 2.0 * static_cast<double>(size * size * size);
  if (device != nullptr) {
    RankDevice rank(*device, ops::GemmMath::f32);
    const bool bf16 = device->device() == Device::cuda;
    const double seconds = bf16 ? seconds_per_gemm<optimus::bf16>(rank, GemmPrecision::bf16, size)
                                : seconds_per_gemm<float>(rank, GemmPrecision::f32, size);
    const double hardware = bf16 ? 0 : theoretical_flops<float>(cpu::measure_clock_hz());
    return {{.measured = flops / seconds, .hardware = hardware},
            format("%s %s %lld^3", device->name().c_str(), bf16 ? "bf16" : "f32", (long long)size)};
  }
  return {concurrent_cpu_peak<float>(1, size), format("%s f32 %lld^3", cpu::gemm_backend().c_str(), (long long)size)};
}

// Seconds per step of the step's GEMMs at q = 1, each timed alone on the bench's device (step_gemms.hpp).
double step_gemm_seconds(const LayerSettings& s, DeviceRuntime* device) {
  // The LM head's GEMMs run on the stored (padded) vocabulary, GptConfig::stored_vocab(1) at q = 1.
  const std::int64_t vocab = s.workload == Workload::gpt ? gpt_config(s).stored_vocab(1) : 0;
  const std::vector<GemmShape> gemms = step_gemms(s.shape, s.layers, vocab);
  if (device != nullptr) {
    RankDevice rank(*device, s.math);
    return time_gemms(gemms, &rank.memory(), rank.queue(), [&] { rank.stream().synchronize(); });
  }
  return time_gemms(gemms, nullptr, ops::Queue{.math = s.math}, [] {});
}

// The bench's settings from the options; the GEMM math is each row's (set per --gemm value).
LayerSettings settings_of(const cli::Options& o, Workload workload, Device device) {
  const bool gpt = workload == Workload::gpt;
  const BlockShape shape = block_shape_option(o, 4);
  const BlockConfig block = cli::arch_of(o);
  const std::string check = o.text("check", "auto");
  // Two untimed steps: the first makes state that lasts (the LM head's padding mask, made on first use and kept in the
  // memory pool after the step's peak), so the second's peak may still take one block more from the pool; from the
  // third on, a step allocates nothing on an accelerator.
  return LayerSettings{.workload = workload,
                  .shape = shape,
                  .block = block,
                  .layers = o.integer("layers", gpt ? 2 : 1),
                  .vocab = gpt ? o.integer("vocab", 1024) : 0,
                  .device = device,
                  .check = check == "on" || (check == "auto" && shape.tokens() * shape.hidden <= (1 << 18)),
                  .math = ops::GemmMath::f32,
                  .dropout = o.real("dropout", 0.0),
                  .warmup = static_cast<int>(o.integer("warmup", 2)),
                  .iters = static_cast<int>(o.integer("iters", 3))};
}

// --gemm: the GEMM maths, a row each (and q), by name; tf32 only on an accelerator.
std::vector<std::pair<std::string, ops::GemmMath>> gemm_maths(const cli::Options& o, Device device) {
  std::vector<std::pair<std::string, ops::GemmMath>> maths;
  for (const std::string& math : o.list("gemm", "f32")) {
    OPTIMUS_CHECK(math == "f32" || math == "tf32" || math == "bf16", "--gemm values must be f32, tf32 or bf16, got '",
                  math, "'");
    OPTIMUS_CHECK(math != "tf32" || device != Device::cpu, "--gemm tf32 needs an accelerator (the CPU has no TF32)");
    maths.emplace_back(math, math == "bf16"   ? ops::GemmMath::bf16
                             : math == "tf32" ? ops::GemmMath::tf32
                                              : ops::GemmMath::f32);
  }
  return maths;
}

// The report's columns and header lines; `peak_what`: what the GEMM peak is (gemm_peak).
Report device_report(const LayerSettings& s, const std::string& peak_what) {
  const std::string device(name_of(s.device));
  const cpu::VectorUnits units = cpu::vector_units(cpu::this_processor());
  Report report({{"device", 6}, {"q", 2}, {"b", 4}, {"s", 5}, {"h", 5}, {"heads", 5}, {"ffn", 6}, {"layers", 6},
                 {"gemm", 5}, {"step_ms", 10}, {"gemm_ms", 9}, {"%gemm", 6}, {"TFLOP/s", 9}, {"peak_TFLOP/s", 12},
                 {"%peak", 6}, {"hw_TFLOP/s", 10}, {"peak%hw", 7},
                 {"peak_MiB/rank", 13}, {"allocs/step", 11}, {"staging_allocs", 14}, {"copied_KiB/step", 15},
                 {"#wrong", 6}, {"t_gemm%", 7}, {"t_elem%", 7}, {"t_attn%", 7}, {"t_wait%", 7}, {"t_other%", 8}});
  report.header(s.workload == Workload::gpt
                    ? format("optimus-bench gpt: a GPT (%lld blocks, vocabulary %lld, LM head tied to wte) forward + "
                             "backward on grids in this process (%s), dropout %g",
                             (long long)s.layers, (long long)s.vocab, device.c_str(), s.dropout)
                    : format("optimus-bench layer: %lld block(s) forward + backward on grids in this process (%s), "
                             "dropout %g",
                             (long long)s.layers, device.c_str(), s.dropout));
  report.header("step: median over iters of the slowest rank; TFLOP/s: model FLOPs (3 x forward, attention in full) "
                "per second over the whole grid; gemm_ms: the step's GEMMs at q = 1 shapes, each timed alone "
                "(%gemm of step_ms; the rest is element-wise work, softmax, casts and communication); peak: " +
                peak_what + ", measured now (CPU rows with q > 1: a thread per core multiplying at once, "
                "min(q^2, cores) threads); hw: the processor's theoretical f32 peak for the cores that peak used "
                "(cores x the clock each ran at, measured right after its products, x " +
                format("%.0f", units.f32_flops_per_cycle()) + " FLOPs per cycle: " + units.basis +
                "), peak%hw the GEMM kernel's share of it (n/a on a GPU); peak_MiB: device memory in use (accelerator) "
                "or tensor bytes (CPU) per rank; allocs/step: raw allocations of a rank's memory pool and page-locked buffers during the timed "
                "steps (must be 0 on an accelerator); staging_allocs: raw allocations of the in-process staging area, "
                "which the ranks sharing one device exchange through, in all the timed steps (it grows, doubling, "
                "until it holds the most contributions alive at once, which depends on how far ranks run ahead; "
                "reported, not required to be 0); copied_KiB/step: bytes copied host <-> device by the whole grid "
                "(the loss and the token ids; counted exactly on the simulated device); #wrong: elements "
                "(and the loss) outside 1e-4 (f32) or 2e-2 (tf32, bf16) of the fp64 reference; t_*: where the timed "
                "steps went on the CPU, mean over ranks of each rank's share of its own step: its GEMMs, element-wise "
                "operations (LayerNorm, GELU, dropout, casts, biases, the embedding and loss), the fused attention, "
                "waiting for SUMMA's transfers, and the rest (copies, allocation, other collectives, waiting for "
                "other ranks)");
  return report;
}

// One row's figures: the q x q ranks' results gathered, and the GEMM peak the row is measured against.
struct RowFigures {
  double seconds = 0;      // the step, max over ranks
  Peak peak;               // FLOP/s
  double peak_bytes = 0;   // max over ranks
  double allocations = 0;  // max over ranks, all the timed steps
  double staging = 0;      // max over ranks, all the timed steps
  double copied = -1;      // bytes by the whole grid in all the timed steps; -1: not counted
  std::int64_t wrong = -1;  // max over ranks; -1: not checked
  std::vector<std::string> breakdown;  // the t_* columns: the ranks' mean shares in percent, or "n/a"
};

// The t_* columns: the ranks' mean breakdown in percent (the CPU only; "n/a" elsewhere).
std::vector<std::string> mean_breakdown(const std::vector<RankResult>& results) {
  std::vector<std::string> breakdown(5, "n/a");
  if (results[0].breakdown) {
    for (std::size_t k = 0; k < breakdown.size(); ++k) {
      double mean = 0;
      for (const RankResult& r : results) mean += (*r.breakdown)[k] / static_cast<double>(results.size());
      breakdown[k] = format("%.1f", 100 * mean);
    }
  }
  return breakdown;
}

// The ranks' results as one row's figures (its peak left to the caller).
RowFigures gathered(const std::vector<RankResult>& results, const LayerSettings& s) {
  RowFigures row;
  row.wrong = s.check ? 0 : -1;
  for (const RankResult& r : results) {
    row.peak_bytes = std::max(row.peak_bytes, r.peak_bytes);
    row.allocations = std::max(row.allocations, r.allocations);
    row.staging = std::max(row.staging, r.staging);
    if (s.check) row.wrong = std::max(row.wrong, r.wrong);  // every rank compares the same global results
  }
  row.seconds = results[0].seconds;
  row.copied = results[0].copied;
  row.breakdown = mean_breakdown(results);
  return row;
}

// One row: a q x q grid's ranks run in this process (run_rank, each timing out after --timeout), against `peak` —
// or, for CPU rows with q > 1, the peak of the cores the grid's q^2 ranks share, one thread per core (q^2 threads
// where there are as many cores), measured before and after the steps and the higher kept (a virtual machine's
// cores are now and then taken away for a while).
RowFigures measure_row(const cli::Options& o, std::int64_t q, const LayerSettings& s, DeviceRuntime* accelerator,
                       const Peak& peak) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool shared_cores = s.device == Device::cpu && q > 1;
  const auto cores_peak = [&] {
    return concurrent_cpu_peak<float>(std::min(static_cast<int>(q * q), cores), o.integer("peak-n", 1024));
  };
  Peak row_peak = shared_cores ? cores_peak() : peak;
  std::vector<RankResult> results(static_cast<std::size_t>(q * q));
  run_in_process(static_cast<int>(q * q), [&](Communicator& w) {
    w.set_timeout(o.timeout());
    results[static_cast<std::size_t>(w.rank())] = run_rank(w, static_cast<int>(q), s, accelerator);
  });
  if (shared_cores) {
    const Peak after = cores_peak();
    if (after.measured > row_peak.measured) row_peak = after;
  }
  RowFigures row = gathered(results, s);
  row.peak = row_peak;
  return row;
}

// The row of grid side q under GEMM math `math` (its name), whose q = 1 GEMMs took `gemm_seconds` per step.
void add_row(Report& report, const LayerSettings& s, std::int64_t q, const std::string& math, double gemm_seconds,
             const RowFigures& row) {
  const double seconds = row.seconds, rate = step_flops(s) / seconds;
  const Peak& peak = row.peak;
  report.row({std::string(name_of(s.device)), format("%lld", (long long)q), format("%lld", (long long)s.shape.batch),
              format("%lld", (long long)s.shape.seq), format("%lld", (long long)s.shape.hidden),
              format("%lld", (long long)s.shape.heads), format("%lld", (long long)s.shape.ffn),
              format("%lld", (long long)s.layers), math,
              format("%.3f", seconds * 1e3), format("%.3f", gemm_seconds * 1e3),
              format("%.1f", 100.0 * gemm_seconds / seconds), format("%.4f", rate / 1e12),
              format("%.3f", peak.measured / 1e12), format("%.1f", 100.0 * rate / peak.measured),
              peak.hardware > 0 ? format("%.3f", peak.hardware / 1e12) : "n/a",
              peak.hardware > 0 ? format("%.1f", 100.0 * peak.measured / peak.hardware) : "n/a",
              format("%.1f", row.peak_bytes / (1 << 20)),
              format("%.0f", row.allocations / s.iters), format("%.0f", row.staging),
              row.copied < 0 ? "n/a" : format("%.2f", row.copied / s.iters / 1024),
              row.wrong < 0 ? "n/a" : format("%lld", (long long)row.wrong), row.breakdown[0], row.breakdown[1],
              row.breakdown[2], row.breakdown[3], row.breakdown[4]});
}

// The footer's verdict on the rows: `ok` (none wrong or allocating where it must not), and whether they were checked.
const char* verdict(bool ok, bool checked) {
  return !ok        ? "FAILED: a row is wrong or allocates"
         : checked ? "all rows checked and allocation-free where required"
                   : "rows NOT checked against the reference (--check off, or auto at this size); "
                     "allocation-free where required";
}

// The `layer` and `gpt` commands: the same options (gpt adds --vocab), rows and checks.
int run_device_bench(Communicator& world, int argc, char** argv, Workload workload) {
  const bool gpt = workload == Workload::gpt;
  const cli::Options o(argc, argv, 2, options_of(gpt ? "gpt" : "layer"));
  world.set_timeout(o.timeout());  // --timeout: the watchdog
  const char* command = gpt ? "gpt" : "layer";
  OPTIMUS_CHECK(world.size() == 1, command, " runs its grids inside one process (in-process ranks); launch 1 process, "
                "not ", world.size());
  const DeviceChoice choice = choose_device(o);
  LayerSettings s = settings_of(o, workload, choice.kind);
  const std::vector<std::pair<std::string, ops::GemmMath>> maths = gemm_maths(o, s.device);
  // Every rank's grid on one device: the simulated device (its memory --device-memory), or GPU 0.
  const std::unique_ptr<DeviceRuntime> accelerator = open_device(choice, 0);
  const auto [peak, peak_what] =
      gemm_peak(accelerator.get(), o.integer("peak-n", s.device == Device::cuda ? 8192 : 1024));
  Report report = device_report(s, peak_what);
  bool ok = true;
  const std::vector<std::int64_t> qs = o.integers("q", "1,2");
  for (const auto& [math, gemm_math] : maths) {
    s.math = gemm_math;
    const double gemm_seconds = step_gemm_seconds(s, accelerator.get());
    for (std::int64_t q : qs) {
      const RowFigures row = measure_row(o, q, s, accelerator.get(), peak);
      ok = ok && row.wrong <= 0 && (s.device == Device::cpu || row.allocations == 0);
      add_row(report, s, q, math, gemm_seconds, row);
    }
  }
  report.footer(verdict(ok, s.check));
  report.print(stdout);
  if (o.has("json")) report.write_json(o.text("json", ""), command);
  return ok ? 0 : 1;
}

}  // namespace

int run_layer_bench(Communicator& world, int argc, char** argv) {
  return run_device_bench(world, argc, argv, Workload::blocks);
}

int run_gpt_bench(Communicator& world, int argc, char** argv) {
  return run_device_bench(world, argc, argv, Workload::gpt);
}

}  // namespace optimus::bench

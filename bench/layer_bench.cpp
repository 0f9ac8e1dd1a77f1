// optimus-bench layer and optimus-bench gpt: transformer blocks (layer) or a small GPT (gpt, with embedding,
// ln_f and the vocabulary-parallel LM head), forward + backward, on grids that run inside this process — q = 1 and
// in-process q = 2 (q^2 threads) — on the CPU or on one GPU (--device cuda: every rank's grid placed on device
// 0). One row per q: step time (max over ranks), model TFLOP/s, the GEMM peak measured by this run (cuBLASLt
// bf16 n^3 on the GPU, the CPU GEMM backend's f32 n^3 on the CPU) and the fraction of it, peak memory per rank,
// allocations made by the steady-state steps (must be 0 on the GPU), and #wrong against the fp64 reference.
// Parameters, gradients, activations and optimizer state are f32; --gemm picks how the GEMMs compute (f32, TF32,
// or bf16 operands with f32 accumulation).
#include <chrono>
#include <memory>
#include <vector>

#include "block_model.hpp"
#include "commands.hpp"
#include "optimus/comm/in_process.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"
#include "optimus/layers/block.hpp"
#include "optimus/layers/gpt.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/reference/compare.hpp"
#include "report.hpp"
#include "step_gemms.hpp"
#include "timing.hpp"

#if OPTIMUS_BENCH_CUDA
#include "optimus/cuda/rank_device.hpp"
#endif

namespace optimus::bench {
namespace {

enum class Workload { blocks, gpt };

struct Settings {
  Workload workload;
  BlockShape shape;
  std::int64_t layers, vocab;
  bool cuda, check;
  ops::GemmMath math;
  int warmup, iters;
};

GptConfig gpt_config(const Settings& s) {
  GptConfig config = block_config(s.shape, s.layers);
  config.vocab = s.vocab;
  return config;
}

// Model FLOPs of one step: the blocks, and for the GPT the LM head's logits (2 N h V forward, twice that backward).
double step_flops(const Settings& s) {
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
  BlocksWork(const Grid& grid, const Settings& s)
      : s_(s), x_(grid, s.shape.tokens(), s.shape.hidden), dy_(grid, s.shape.tokens(), s.shape.hidden),
        out_(grid, s.shape.tokens(), s.shape.hidden), din_(grid, s.shape.tokens(), s.shape.hidden) {
    const GptConfig config = block_config(s.shape, s.layers);
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
    for (auto& b : blocks_) a = b->forward(a, s_.shape.seq, Pass{1, true});
    DistMatrix<float> d = dy_.clone();
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) d = (*it)->backward(d);
    out_ = std::move(a);
    din_ = std::move(d);
  }
  std::int64_t wrong(double tol) override {
    const auto [y_ref, dx_ref] =
        reference_blocks(s_.shape, s_.layers, x_.to_global().cast<double>(), dy_.to_global().cast<double>());
    const reference::Matrix y = out_.to_global().cast<double>(), dx = din_.to_global().cast<double>();
    return reference::compare_relative(y, y_ref, tol).wrong + reference::compare_relative(dx, dx_ref, tol).wrong;
  }

 private:
  const Settings& s_;
  std::vector<std::unique_ptr<TransformerBlock2D<float>>> blocks_;
  DistMatrix<float> x_, dy_, out_, din_;
};

// A GPT (its initialization rule) on fixed token ids; checks the loss and every parameter's gradient.
class GptWork final : public Work {
 public:
  GptWork(const Grid& grid, const Settings& s) : s_(s), config_(gpt_config(s)), model_(grid, config_) {
    for (std::int64_t t = 0; t < s.shape.tokens(); ++t) {
      tokens_.push_back(static_cast<int>((7 * t + 3) % s.vocab));
      targets_.push_back(static_cast<int>((5 * t + 1) % s.vocab));
    }
  }
  void step() override {
    model_.zero_grad();
    loss_ = model_.forward(tokens_, targets_, s_.shape.batch, 1);
    model_.backward();
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
  const Settings& s_;
  GptConfig config_;
  Gpt2D<float> model_;
  std::vector<int> tokens_, targets_;
  double loss_ = 0;
};

struct RankResult {
  double seconds = 0;     // the step, max over ranks (same on every rank)
  double peak_bytes = 0;  // this rank's peak: device allocator in use (GPU) or tracked tensors (CPU)
  double allocations = 0;  // raw device allocations during the timed steps
  std::int64_t wrong = -1;
};

// One rank of a q x q grid in this process: builds the work, times the steps, checks the result.
RankResult run_rank(Communicator& world, int q, const Settings& s) {
#if OPTIMUS_BENCH_CUDA
  std::unique_ptr<cuda::RankDevice> gpu = s.cuda ? std::make_unique<cuda::RankDevice>(0, s.math) : nullptr;
  Grid grid = gpu ? gpu->grid(world, q) : Grid::create(world, q);
  auto synchronize = [&] {
    if (gpu) gpu->stream.synchronize();
  };
  auto raw_allocations = [&] {  // the rank's tensors, its in-process staging area and its pinned host buffers
    return gpu ? static_cast<double>(gpu->memory.allocator().stats().raw_allocations +
                                     gpu->staging->raw_allocations() +
                                     static_cast<std::size_t>(gpu->memory.staging().pinned_allocations()))
               : 0.0;
  };
#else
  OPTIMUS_CHECK(!s.cuda, "--device cuda: this optimus-bench was built without CUDA");
  Grid grid = Grid::create(world, q);
  auto synchronize = [] {};
  auto raw_allocations = [] { return 0.0; };
#endif
  grid.set_gemm_math(s.math);
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
  grid.memory().reset_peaks();
  const double before = raw_allocations();
  RankResult r;
  r.seconds = time_max_over_ranks(world, 0, s.iters, step);
  r.allocations = raw_allocations() - before;
#if OPTIMUS_BENCH_CUDA
  r.peak_bytes = gpu ? static_cast<double>(gpu->memory.allocator().stats().peak_in_use)
                     : static_cast<double>(grid.memory().peak_total());
#else
  r.peak_bytes = static_cast<double>(grid.memory().peak_total());
#endif
  if (s.check) r.wrong = work->wrong(s.math == ops::GemmMath::f32 ? 1e-4 : 2e-2);
  return r;
}

// The GEMM peak of this machine as this run measures it, in FLOP/s, and what it is.
std::pair<double, std::string> gemm_peak(bool cuda, std::int64_t size) {
#if OPTIMUS_BENCH_CUDA
  if (cuda) {
    cuda::DeviceAllocator alloc(0);
    cuda::Stream stream;
    cuda::LtGemm gemm(alloc);
    const std::size_t bytes = static_cast<std::size_t>(size * size) * 2;
    void* a = alloc.allocate(bytes);
    void* b = alloc.allocate(bytes);
    void* c = alloc.allocate(bytes);
    OPTIMUS_CHECK_CUDA(cudaMemsetAsync(a, 0, bytes, stream.get()));
    OPTIMUS_CHECK_CUDA(cudaMemsetAsync(b, 0, bytes, stream.get()));
    auto once = [&] {
      gemm.run(cuda::GemmPrecision::bf16, false, false, size, size, size, 1.0f, a, size, b, size, 0.0f, c, size,
               stream.get());
    };
    once();
    stream.synchronize();
    const int reps = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < reps; ++k) once();
    stream.synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    alloc.release(a);
    alloc.release(b);
    alloc.release(c);
    return {2.0 * static_cast<double>(size * size * size) / seconds, format("cuBLASLt bf16 %lld^3", (long long)size)};
  }
#endif
  Tensor<float> a(Shape{size, size}), b(Shape{size, size}), c(Shape{size, size});
  auto once = [&] { cpu::gemm<float>(cpu::Trans::no, cpu::Trans::no, 1.0f, a.view(), b.view(), 0.0f, c.view()); };
  once();
  const auto t0 = std::chrono::steady_clock::now();
  once();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {2.0 * static_cast<double>(size * size * size) / seconds,
          format("%s f32 %lld^3", cpu::gemm_backend().c_str(), (long long)size)};
}

// Seconds per step of the step's GEMMs at q = 1, each timed alone on the bench's device (step_gemms.hpp).
double step_gemm_seconds(const Settings& s) {
  const std::vector<GemmShape> gemms = step_gemms(s.shape, s.layers, s.workload == Workload::gpt ? s.vocab : 0);
#if OPTIMUS_BENCH_CUDA
  if (s.cuda) {
    cuda::RankDevice gpu(0, s.math);
    ops::Queue queue = gpu.queue();
    queue.scratch = MemoryTag{nullptr, MemoryKind::workspace, &gpu.memory};
    return time_gemms(gemms, &gpu.memory, queue, [&] { gpu.stream.synchronize(); });
  }
#endif
  return time_gemms(gemms, nullptr, ops::Queue{nullptr, nullptr, s.math, {}}, [] {});
}

// The `layer` and `gpt` commands: the same options (gpt adds --vocab), rows and checks.
int run_device_bench(Communicator& world, int argc, char** argv, Workload workload) {
  const bool gpt = workload == Workload::gpt;
  std::vector<std::string> names{"device", "q", "b", "s", "h", "heads", "ffn", "layers", "gemm", "warmup", "iters",
                                 "check", "peak-n", "json"};
  if (gpt) names.emplace_back("vocab");
  const cli::Options o(argc, argv, 2, names);
  const char* command = gpt ? "gpt" : "layer";
  OPTIMUS_CHECK(world.size() == 1, command, " runs its grids inside one process (in-process ranks); launch 1 process, "
                "not ", world.size());
  Settings s;
  s.workload = workload;
  const std::string device = o.text("device", "cpu");
  OPTIMUS_CHECK(device == "cpu" || device == "cuda", "--device must be cpu or cuda, got '", device, "'");
  s.cuda = device == "cuda";
  s.shape = block_shape_option(o, 4);
  s.layers = o.integer("layers", gpt ? 2 : 1);
  s.vocab = gpt ? o.integer("vocab", 1024) : 0;
  const std::string math = o.text("gemm", "f32");
  OPTIMUS_CHECK(math == "f32" || math == "tf32" || math == "bf16", "--gemm must be f32, tf32 or bf16, got '", math,
                "'");
  OPTIMUS_CHECK(math != "tf32" || s.cuda, "--gemm tf32 needs --device cuda (the CPU has no TF32)");
  s.math = math == "bf16" ? ops::GemmMath::bf16 : math == "tf32" ? ops::GemmMath::tf32 : ops::GemmMath::f32;
  s.warmup = static_cast<int>(o.integer("warmup", 1));
  s.iters = static_cast<int>(o.integer("iters", 3));
  const std::string check = o.text("check", "auto");
  s.check = check == "on" || (check == "auto" && s.shape.tokens() * s.shape.hidden <= (1 << 18));
  const auto [peak, peak_what] = gemm_peak(s.cuda, o.integer("peak-n", s.cuda ? 8192 : 1024));
  const double flops = step_flops(s);
  const double gemm_seconds = step_gemm_seconds(s);

  Report report({{"device", 6}, {"q", 2}, {"b", 4}, {"s", 5}, {"h", 5}, {"heads", 5}, {"ffn", 6}, {"layers", 6},
                 {"gemm", 5}, {"step_ms", 10}, {"gemm_ms", 9}, {"%gemm", 6}, {"TFLOP/s", 9}, {"peak_TFLOP/s", 12},
                 {"%peak", 6},
                 {"peak_MiB/rank", 13}, {"allocs/step", 11}, {"#wrong", 6}});
  report.header(gpt ? format("optimus-bench gpt: a GPT (%lld blocks, vocabulary %lld, LM head tied to wte) forward + "
                             "backward on grids in this process (%s)",
                             (long long)s.layers, (long long)s.vocab, device.c_str())
                    : format("optimus-bench layer: %lld block(s) forward + backward on grids in this process (%s)",
                             (long long)s.layers, device.c_str()));
  report.header("step: median over iters of the slowest rank; TFLOP/s: model FLOPs (3 x forward, attention in full) "
                "per second over the whole grid; gemm_ms: the step's GEMMs at q = 1 shapes, each timed alone "
                "(%gemm of step_ms; the rest is element-wise work, softmax, casts and communication); peak: " +
                peak_what + ", measured now; peak_MiB: device memory in "
                "use (GPU) or tensor bytes (CPU) per rank; allocs/step: raw allocations during the timed steps; "
                "#wrong: elements (and the loss) outside 1e-4 (f32) or 2e-2 (tf32, bf16) of the fp64 reference");
  bool ok = true;
  for (std::int64_t q : o.integers("q", "1,2")) {
    OPTIMUS_CHECK(q >= 1, "--q values must be at least 1, got ", q);
    std::vector<RankResult> results(static_cast<std::size_t>(q * q));
    run_in_process(static_cast<int>(q * q), [&](Communicator& w) {
      results[static_cast<std::size_t>(w.rank())] = run_rank(w, static_cast<int>(q), s);
    });
    double peak_bytes = 0, allocations = 0;
    std::int64_t wrong = s.check ? 0 : -1;
    for (const RankResult& r : results) {
      peak_bytes = std::max(peak_bytes, r.peak_bytes);
      allocations = std::max(allocations, r.allocations);
      if (s.check) wrong = std::max(wrong, r.wrong);  // every rank compares the same global results
    }
    const double seconds = results[0].seconds, rate = flops / seconds;
    ok = ok && wrong <= 0 && (!s.cuda || allocations == 0);
    report.row({device, format("%lld", (long long)q), format("%lld", (long long)s.shape.batch),
                format("%lld", (long long)s.shape.seq), format("%lld", (long long)s.shape.hidden),
                format("%lld", (long long)s.shape.heads), format("%lld", (long long)s.shape.ffn),
                format("%lld", (long long)s.layers), math,
                format("%.3f", seconds * 1e3), format("%.3f", gemm_seconds * 1e3),
                format("%.1f", 100.0 * gemm_seconds / seconds), format("%.4f", rate / 1e12),
                format("%.3f", peak / 1e12),
                format("%.1f", 100.0 * rate / peak), format("%.1f", peak_bytes / (1 << 20)),
                format("%.0f", allocations / s.iters), wrong < 0 ? "n/a" : format("%lld", (long long)wrong)});
  }
  report.footer(ok ? "all rows checked and allocation-free where required" : "FAILED: a row is wrong or allocates");
  report.print_header(stdout);
  for (std::size_t r = 0; r < report.rows(); ++r) report.print_row(stdout, r);
  report.print_footer(stdout);
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

// The option tables of optimus-bench's commands.
#include "bench_options.hpp"

#include <cstdint>
#include <limits>

#include "optimus/programs/arch_options.hpp"
#include "optimus/core/error.hpp"
#include "optimus/programs/device_choice.hpp"

namespace optimus::bench {
namespace {

constexpr std::int64_t kSide = std::int64_t{1} << 20;   // matrix sides, tokens per sequence, hidden sizes
constexpr std::int64_t kBatch = std::int64_t{1} << 20;  // sequences
constexpr std::int64_t kIters = 1000000;

// A block's shape: --b --s --h --heads --ffn --layers, and its blocks: --arch --kv-heads --rope-theta.
std::vector<cli::Spec> block_shape(bool with_batch) {
  std::vector<cli::Spec> specs;
  if (with_batch) specs.push_back(cli::integer("b", 1, kBatch, "sequences per batch"));
  for (cli::Spec s : {cli::integer("s", 1, kSide, "tokens per sequence"), cli::integer("h", 1, kSide, "hidden size"),
                      cli::integer("heads", 1, 1 << 16, "attention heads"),
                      cli::integer("ffn", 1, 4 * kSide, "MLP inner size (default 4h)"),
                      cli::integer("layers", 1, 1 << 12, "transformer blocks")}) {
    specs.push_back(std::move(s));
  }
  for (cli::Spec& s : cli::arch_options()) specs.push_back(std::move(s));
  return specs;
}

std::vector<cli::Spec> timing() {
  return {cli::integer("warmup", 0, kIters, "untimed iterations first"),
          cli::integer("iters", 1, kIters, "timed iterations")};
}

std::vector<cli::Spec> joined(std::vector<std::vector<cli::Spec>> parts) {
  std::vector<cli::Spec> all;
  for (auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

cli::Spec json() { return cli::output_file("json", "also write the rows as JSON to this file"); }
cli::Spec check() {
  return cli::choice("check", {"auto", "on", "off"}, "compare with the reference (auto: small shapes)");
}

std::vector<cli::Spec> device_bench(bool gpt) {
  std::vector<cli::Spec> specs = joined(
      {device_options(), {cli::integers("q", 1, 64, "grid sides, a row each (default 1,2)")}, block_shape(true),
       {cli::choices("gemm", {"f32", "tf32", "bf16"}, "GEMM maths, a row each (tf32 needs an accelerator)")},
       timing(), {check(), cli::integer("peak-n", 1, 1 << 16, "side of the GEMM that measures the peak"), json(),
                  cli::real("dropout", 0.0, 0.99, "dropout probability of the attention and residual dropouts "
                            "(and the embedding's, gpt), as in training (default 0)")}});
  if (gpt) specs.push_back(cli::integer("vocab", 1, 1 << 24, "vocabulary"));
  return specs;
}

// summa: the SUMMA products' sizes, kinds and element types, timing, ScaLAPACK and the outputs.
std::vector<cli::Spec> summa_options() {
  return joined({{cli::integers("n", 1, kSide, "sizes n, a row each (default 1024)"),
                  cli::integer("m", 1, kSide, "rows of A and C (default n)"),
                  cli::integer("k", 1, kSide, "inner dimension (default n)"),
                  cli::choices("ops", {"ab", "abt", "atb"}, "products (default all)"),
                  cli::choices("dtype", {"f64", "f32"}, "element types (default f64)")},
                 timing(),
                 {cli::choice("scalapack", {"auto", "on", "off"}, "compare with ScaLAPACK's p?gemm"), json(),
                  cli::output_file("trace", "a Chrome trace of the overlapped products")}});
}

// scaling: the layout, the blocks' shape, types, timing, the check, the budget and the outputs.
std::vector<cli::Spec> scaling_options() {
  return joined({{cli::choice("layout", {"1d", "2d"}, "Megatron's 1D or the 2D grid")}, block_shape(true),
                 {cli::choice("dtype", {"f32", "f64"}, "layer type"), cli::choice("gemm", {"f32", "bf16"}, "GEMM math")},
                 timing(),
                 {check(), cli::positive_real("budget-gib", 1e6, "memory per rank for the largest batch"),
                  cli::choice("device", {"cpu", "sim", "cuda"}, "cpu only: ranks are MPI processes"),
                  cli::output_file("trace", "a Chrome trace"), json()}});
}

// blas: the product's side, the threads and OpenBLAS kernels, a row each, and the sweeps.
std::vector<cli::Spec> blas_options() {
  return {cli::integer("n", 1, 1 << 14, "side of the products (default 1024)"),
          cli::integers("threads", 1, 1 << 10, "threads multiplying at once, a row each (default 1,2)"),
          cli::choices("kernels", {"Prescott", "Sandybridge", "Haswell", "Zen", "SkylakeX", "Cooperlake"},
                       "OpenBLAS kernels, in turn (default: every one this processor runs)"),
          cli::integer("sweeps", 1, 100, "sweeps over the kernels, each row its best (default 3)"),
          json()};
}

// attention: the device, the attention's shape and dropout, the products' math, timing and JSON.
std::vector<cli::Spec> attention_options() {
  return joined({device_options(),
                 {cli::integer("b", 1, 1 << 16, "sequences (default 2)"),
                  cli::integers("s", 1, 1 << 20, "sequence lengths, a row each (default 1024,2048,4096,8192)"),
                  cli::integer("heads", 1, 1 << 12, "heads (default 16)"),
                  cli::integer("d", 1, 1 << 12, "head dimension (default 128)"),
                  cli::real("dropout", 0.0, 0.99, "attention dropout (default 0)"),
                  cli::choice("gemm", {"f32", "bf16"},
                              "the products' math (default f32; bf16: tensor cores with bf16 operands on a GPU)")},
                 timing(), {json()}});
}

// model: the calibration or the cluster's links and GEMM rate, the blocks' shape, the GPU counts and --iso.
std::vector<cli::Spec> model_options() {
  return joined({{cli::input_file("calibration", "the JSON optimus-bench calibrate wrote")}, block_shape(true),
                 {cli::integers("ps", 1, 1 << 20, "GPU counts, a row each"),
                  cli::integer("node", 1, 1024, "GPUs per node"),
                  cli::positive_real("nvlink-gbs", 1e6, "intra-node bandwidth, GB/s"),
                  cli::positive_real("ib-gbs", 1e6, "inter-node bandwidth, GB/s"),
                  cli::real("nvlink-alpha-us", 0, 1e6, "intra-node latency, microseconds"),
                  cli::real("ib-alpha-us", 0, 1e6, "inter-node latency, microseconds"),
                  cli::positive_real("tflops", 1e6, "GEMM rate, TFLOP/s"),
                  cli::integer("elem-bytes", 1, 8, "bytes per element"),
                  cli::real("iso", 0.01, 0.99, "also the isoefficiency batch at this efficiency, and its exponent"),
                  json()}});
}

// paper: the job's GPUs, model-parallel ranks and hidden sizes, the GPT, the links, the GEMM rate and memory.
std::vector<cli::Spec> paper_options() {
  std::vector<cli::Spec> specs = {cli::integer("gpus", 1, 1 << 20, "GPUs in the job (default 64)"),
          cli::integers("tp", 1, 1 << 20, "model-parallel ranks, squares dividing --gpus, a set of rows each "
                        "(default 16,64)"),
          cli::integers("h", 1, kSide, "hidden sizes, a row each (default 2048,4096,8192)"),
          cli::integer("heads", 1, 1 << 16, "attention heads (default 64)"),
          cli::integer("b", 1, kBatch, "sequences per step (default 96, the authors' benchmark)"),
          cli::integer("s", 1, kSide, "tokens per sequence (default 512)"),
          cli::integer("layers", 1, 1 << 12, "transformer blocks (default 24)"),
          cli::integer("vocab", 1, 1 << 24, "vocabulary of the GPT whose state max_b holds (default 30522)"),
          cli::positive_reals("ib-gbs", 1e6, "InfiniBand GB/s per GPU: the node adapter's bandwidth / 4, a set of "
                              "rows each (default 1.7,3.1: FDR, HDR100)"),
          cli::positive_real("pcie-gbs", 1e6, "GB/s per GPU between the GPUs of a node (default 10)"),
          cli::positive_real("tflops", 1e6, "achieved fp32 GEMM TFLOP/s per GPU (default 9)"),
          cli::bytes("memory", "memory per GPU the training state may fill (default 15GiB)"), json()};
  for (cli::Spec& s : cli::arch_options()) specs.push_back(std::move(s));
  return specs;
}

// activations: the blocks' shape (without --b), the grid sides and GEMM maths, the budget and --measure.
std::vector<cli::Spec> activations_options() {
  return joined({block_shape(false),
                 {cli::integers("q", 1, 64, "grid sides, rows each"),
                  cli::choices("gemm", {"f32", "bf16"}, "GEMM maths, rows each"),
                  cli::positive_real("budget-gib", 1e6, "memory per rank for the largest batch"),
                  cli::choice("measure", {"on", "off"}, "measure the tracker beside the formula"), json()}});
}

// pipeline: the stages, grid or 1D layout, micro-batches, schedules and chunks, the GPT, timing and outputs.
std::vector<cli::Spec> pipeline_options() {
  return joined({{cli::integer("pp", 1, 1 << 10, "pipeline stages S"), cli::integer("q", 1, 64, "grid side"),
                  cli::choice("layout", {"2d", "1d"}, "stages of q x q grids (2d) or of world/pp 1D ranks (1d)"),
                  cli::integer("m", 1, 1 << 12, "micro-batches per step"),
                  cli::choices("schedules", {"gpipe", "1f1b", "interleaved", "wave", "zb"},
                               "schedules, a row each (default all)"),
                  cli::integer("chunks", 2, 64, "chunks per stage of interleaved and wave (default 2)"),
                  cli::choices("execution", {"static", "dynamic"},
                               "execution orders, a row each per schedule (default both)"),
                  cli::real("jitter", 0, 10, "each operation delayed by FRACTION x a deterministic draw in [0, 1) x its "
                            "time (default 0)")},
                 block_shape(true),
                 {cli::integer("vocab", 1, 1 << 24, "vocabulary"), cli::choice("dtype", {"f32", "f64"}, "layer type")},
                 timing(), {cli::output_file("trace", "a Chrome trace of every schedule's step, a row per rank"),
                            json()}});
}

// offload: the device, grid sides, the GPT, the offload modes and sweep, timing, --largest and the outputs.
std::vector<cli::Spec> offload_options() {
  return joined(
      {device_options(), {cli::integers("q", 1, 64, "grid sides, rows each (default 1)")}, block_shape(true),
       {cli::integer("vocab", 1, 1 << 24, "vocabulary (default 8192)"),
        cli::choices("offload", {"none", "optimizer", "spill", "spill+activations"}, "modes, a row each (default all)"),
        cli::choice("offload-update", {"device", "host"}, "where the offloaded AdamW updates (default: faster here)"),
        cli::integer("chunk", 1, std::int64_t{1} << 40, "elements per offloaded optimizer chunk (default 1048576)"),
        cli::positive_reals("sweep", 1e6, "GB/s: spill rows at these copy bandwidths too (--device sim)")},
       timing(),
       {cli::choice("largest", {"on", "off"}, "the most blocks that train in --device-memory, per mode"),
        cli::integer("max-layers", 1, 1 << 12, "the most blocks --largest tries (default 64)"),
        cli::output_file("trace", "PREFIX: each mode's last forward + backward as PREFIX-MODE.json (--device sim)"),
        json()}});
}

// plan: the calibration, cores, ranks, memory, batch and layouts planned, the GPT, timing and JSON.
std::vector<cli::Spec> plan_options() {
  return joined({{cli::input_file("calibration", "optimus-bench calibrate's JSON (default: measured first, here)"),
                  cli::integer("cores", 1, 1 << 16, "ranks that compute at once (default: this machine's cores)"),
                  cli::integer("in-process", 1, 256, "run this many ranks as threads (default: the MPI world)"),
                  cli::bytes("memory", "memory per rank the plans may fill (default 1GiB)"),
                  cli::integer("batch", 1, kBatch, "global batch in sequences (default 16)"),
                  cli::integer("vocab", 1, 1 << 24, "vocabulary (default 512)"),
                  cli::choice("layout", {"2d", "1d"}, "only 2D or only 1D layouts (default both)"),
                  cli::integer("max-micro-batches", 1, 1 << 12, "largest micro-batch count planned (default 4)"),
                  cli::integer("limit", 1, 1 << 12, "the most plans run, evenly spread over the ranking (default 40)"),
                  cli::integer("rounds", 1, 100, "times every plan is measured, round by round (default 1)")},
                 block_shape(false), timing(), {json()}});
}

// sweep: the members, the slots measured and simulated, the pipeline baseline's micro-batches, the GPT and JSON.
std::vector<cli::Spec> sweep_options() {
  return joined({device_options(), {cli::integer("members", 1, 1 << 10, "members of the sweep (default 8)"),
          cli::integer("slots", 1, 64, "slots of the measured runs, a thread each (default 2)"),
          cli::integers("simulate", 1, 1 << 10, "slots of the simulated rows (default 2,4,8)"),
          cli::integer("m", 1, 1 << 10, "the pipeline baseline's micro-batches (default 4)"),
          cli::integer("in-flight", 0, 1 << 10, "most members with a step in flight (default 0: all)"),
          cli::integer("repeats", 1, 1 << 10, "runs of each measured row, interleaved; its median (default 3)"),
          cli::integer("steps", 1, kIters, "steps per member (default 3)"),
          cli::integer("b", 1, kBatch, "sequences per step (default 4)"),
          cli::integer("s", 1, kSide, "tokens per sequence (default 32)"),
          cli::integer("h", 1, kSide, "hidden size (default 64)"),
          cli::integer("heads", 1, 1 << 16, "attention heads (default 2)"),
          cli::integer("layers", 1, 1 << 12, "transformer blocks (default 4)"),
          cli::integer("vocab", 1, 1 << 24, "vocabulary (default 256)"),
          cli::choice("offload", {"none", "spill", "spill+activations"},
                      "the members' blocks (and saved activations) in host memory (needs --device)"),
          json()}});
}

// checkpoint: the GPT saved and loaded, the directory, the iterations and JSON.
std::vector<cli::Spec> checkpoint_options() {
  return {cli::integer("h", 1, kSide, "hidden size"), cli::integer("layers", 1, 1 << 12, "transformer blocks"),
          cli::integer("heads", 1, 1 << 16, "attention heads"), cli::integer("vocab", 1, 1 << 24, "vocabulary"),
          cli::integer("seq", 1, kSide, "positions"),
          cli::output_directory("dir", "where the checkpoints go (default checkpoint-bench)"),
          cli::integer("iters", 1, kIters, "saves and loads timed"), json()};
}

}  // namespace

std::vector<std::string> commands() {
  return {"summa",    "scaling", "calibrate", "model", "paper", "layer", "gpt", "activations", "checkpoint",
          "pipeline", "offload", "plan",      "blas",  "attention", "sweep"};
}

// The command's own options (options_of adds --timeout).
static std::vector<cli::Spec> command_options(const std::string& command) {
  if (command == "summa") return summa_options();
  if (command == "scaling") return scaling_options();
  if (command == "calibrate") return {json(), cli::integer("iters", 1, kIters, "repetitions of each measurement")};
  if (command == "blas") return blas_options();
  if (command == "attention") return attention_options();
  if (command == "model") return model_options();
  if (command == "paper") return paper_options();
  if (command == "layer") return device_bench(false);
  if (command == "gpt") return device_bench(true);
  if (command == "activations") return activations_options();
  if (command == "pipeline") return pipeline_options();
  if (command == "offload") return offload_options();
  if (command == "plan") return plan_options();
  if (command == "checkpoint") return checkpoint_options();
  if (command == "sweep") return sweep_options();
  OPTIMUS_FAIL("optimus-bench: no command '", command, "'");
}

std::vector<cli::Spec> options_of(const std::string& command) {
  std::vector<cli::Spec> specs = command_options(command);
  specs.push_back(cli::timeout_option());
  return specs;
}

}  // namespace optimus::bench

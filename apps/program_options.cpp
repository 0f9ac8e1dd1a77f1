// The option tables of summa_2x2 and train_gpt.
#include "program_options.hpp"

#include <cstdint>
#include <limits>

#include "optimus/checkpoint/token_file.hpp"
#include "optimus/programs/arch_options.hpp"
#include "optimus/programs/device_choice.hpp"

namespace optimus::apps {
namespace {
constexpr std::int64_t kSide = std::int64_t{1} << 20;
constexpr std::int64_t kSteps = 100000000;

}  // namespace

std::vector<cli::Spec> summa_2x2_options() {
  return {cli::integer("m", 1, kSide, "rows of A and C (default 384)"),
          cli::integer("n", 1, kSide, "columns of B and C (default 256)"),
          cli::integer("k", 1, kSide, "inner dimension (default 512)"),
          cli::integer("q", 1, 64, "grid side; the world has q*q ranks (default 2)"), cli::timeout_option()};
}

std::vector<cli::Spec> train_gpt_options() {
  std::vector<cli::Spec> specs = {
      cli::choice("layout", {"2d", "1d"}, "2d: q x q grids (default); 1d: the Megatron baseline's groups of --p ranks"),
      cli::integer("q", 1, 64, "grid side (default 2); ranks / (pp q^2) data-parallel replicas"),
      cli::integer("p", 1, 1 << 16, "--layout 1d: ranks per tensor-parallel group (default ranks / pp)"),
      cli::integer("dp", 1, 1 << 20, "data-parallel replicas (default ranks / (pp q^2), or ranks / (pp p) in 1D)"),
      cli::integer("layers", 1, 1 << 12, "transformer blocks (default 2)"),
      cli::integer("hidden", 1, kSide, "hidden size (default 128)"),
      cli::integer("heads", 1, 1 << 16, "attention heads (default 4)"),
      cli::integer("ffn", 1, 4 * kSide, "MLP inner size (default 4 hidden; --arch llama: 8 hidden / 3 rounded up to what "
                   "the layout splits evenly)"),
      cli::integer("seq", 1, kSide, "tokens per sequence (default 64)"),
      cli::integer("batch", 1, 1 << 20, "sequences per replica and step (default 16)"),
      cli::integer("steps", 1, kSteps, "training steps (default 1200)"),
      cli::positive_real("lr", 10, "peak learning rate (default 3e-3)"),
      cli::integer("seed", 0, std::numeric_limits<std::int64_t>::max(), "initialization, data and dropout (default 1234)"),
      cli::integer("every", 1, kSteps, "steps between printed losses (default 50)"),
      cli::input_file("text", "the text to train on (default the GPL-3 text)"),
      cli::integer("sample", 0, 1 << 20, "characters (or tokens) sampled at the end (default 240)"),
      cli::real("dropout", 0, 0.99, "dropout probability (default 0.1)"),
      cli::choice("gemm", {"f32", "bf16"}, "GEMM math (bf16: mixed precision)"),
      cli::integer("in-process", 1, 64, "run this many ranks as threads of this process"),
      cli::integer("micro-batches", 1, 1 << 20, "micro-batches per step (default 1)"),
      cli::integer("pp", 1, 64, "pipeline stages (default 1); ranks = dp x pp x q^2"),
      cli::choice("schedule", {"gpipe", "1f1b", "interleaved", "wave", "zb"}, "pipeline schedule (default 1f1b; --pp > 1)"),
      cli::integer("chunks", 1, 64, "model chunks per stage (interleaved, wave; default 2)"),
      cli::choice("execution", {"static", "dynamic"},
                  "how the stages run the schedule (--pp > 1): in its order (default), or message-driven"),
      cli::choice("recompute", {"none", "selective", "full"}, "activation recomputation (default none)"),
      cli::choice("plan", {"auto"}, "the planner's fastest layout for this machine (--batch: the global batch)"),
      cli::input_file("calibration", "--plan auto: optimus-bench calibrate's JSON instead of measuring now"),
      cli::integer("cores", 1, 1 << 16, "--plan auto --calibration: ranks that compute at once (default: cores)"),
      cli::choice("offload", {"none", "optimizer", "spill", "spill+activations"},
                  "what lives in host memory (default none; needs a device): AdamW's moments, also the blocks' "
                  "parameters and gradients, also their saved activations"),
      cli::choice("offload-update", {"device", "host"}, "where offloaded AdamW updates (default: faster here)"),
      cli::output_directory("save", "save checkpoints under this directory, step_N each"),
      cli::integer("save-every", 1, kSteps, "steps between saves (default: at the end)"),
      cli::integer("keep", 0, 1 << 20, "keep the newest K checkpoints (default 0: all)"),
      cli::input_directory("resume", "a checkpoint, or a save directory for its newest"),
      cli::input_path("init", "start from a Hugging Face safetensors or llm.c .bin GPT-2, or a Hugging Face Llama or "
                      "BERT directory"),
      cli::output_file("export", "write the trained model (a GPT-2: .bin llm.c, else safetensors; a Llama or a BERT: a "
                       "new Hugging Face directory)"),
      cli::input_files("data", "token files FILE[,VALID_FILE] instead of the text"),
      cli::choice("data-format", {"llmc", "raw"},
                  "--data's layout: llm.c's (a header with its magic: uint16 or uint32 ids; default) or nanoGPT's raw "
                  "uint16"),
      cli::integer("vocab", 1, checkpoint::TokenFile::kLargestVocab,
                   "the model's vocabulary with --data (default the tokenizer's: 50257 for uint16 ids, 128256 for "
                   "uint32)"),
      cli::flag("skip-nonfinite", "skip a step whose loss or gradient norm is NaN or inf instead of stopping"),
      cli::flag("check-finite", "stop at the first layer whose output or input gradient holds NaN or inf, naming it"),
      cli::timeout_option(),
  };
  for (cli::Spec& s : device_options()) specs.push_back(std::move(s));
  for (cli::Spec& s : cli::arch_options()) specs.push_back(std::move(s));
  specs.push_back(cli::positive_real("mask-prob", 1, "--arch bert: the share of positions masked and predicted, in "
                                     "(0, 1) (default 0.15)"));
  for (const char* id : kSpecialIdOptions) {
    specs.push_back(cli::integer(id, 0, checkpoint::TokenFile::kLargestVocab - 1,
                                 "--arch bert: a special id, outside the data's ids (default bert-base-uncased's "
                                 "with --data: PAD 0, CLS 101, SEP 102, MASK 103; with --text the four after its "
                                 "characters)"));
  }
  specs.push_back(cli::flag("specials-in-data", "--arch bert with --data: the special ids are the data's own (its "
                            "tokenizer's): the data may hold them"));
  return specs;
}

std::vector<cli::Spec> optimus_sweep_options() {
  std::vector<cli::Spec> specs = {
      cli::integer("in-process", 1, 64, "run this many ranks as threads of this process (default: the MPI world's)"),
      cli::integer("q", 1, 8, "each slot a q x q grid of ranks (default 1): slots = ranks / q^2"),
      cli::choice("scheduler", {"lrtf", "round-robin", "model-parallel", "pipeline"},
                  "which member's operation a slot runs next (default lrtf: the longest remaining training time)"),
      cli::choice("offload", {"none", "spill", "spill+activations"},
                  "each member's blocks (and saved activations) in host memory, the slots' device buffers shared by "
                  "the members in turn (needs --device; default none)"),
      cli::integer("in-flight", 1, 1 << 10,
                   "the most members with a step in flight at once (default all, or on a simulated device as many as "
                   "it holds)"),
      cli::choice("gemm", {"f32", "bf16"}, "every member's GEMM math (bf16: mixed precision; default f32)"),
      cli::output_file("record", "write the members' outcomes and the run's figures as JSON"),
      cli::flag("resume", "each member that saves (--save DIR) resumes from DIR's newest checkpoint"),
      cli::timeout_option(),
  };
  for (cli::Spec& s : device_options()) specs.push_back(std::move(s));
  return specs;
}

std::vector<cli::Spec> optimus_plan_options() {
  std::vector<cli::Spec> specs = {
      cli::integer("gpus", 1, 1 << 20, "GPUs (or ranks) in the job"),
      cli::integer("gpus-per-node", 1, 1 << 10, "GPUs per node (default 8; with --calibration: all)"),
      cli::bytes("device-memory", "memory per GPU the plan may fill (default 80GiB)"),
      cli::bytes("host-memory", "host memory per GPU for offload (default the preset's, or --device-memory)"),
      cli::input_file("calibration", "the JSON optimus-bench calibrate wrote: this machine's rates (CPU ranks)"),
      cli::integer("cores", 1, 1 << 20, "ranks that compute at once (with --calibration; default --gpus)"),
      cli::positive_real("nvlink-gbs", 1e6, "intra-node bandwidth per GPU, GB/s (default 450)"),
      cli::positive_real("ib-gbs", 1e6, "inter-node bandwidth per GPU, GB/s (default 50)"),
      cli::positive_real("tflops", 1e6, "achieved GEMM TFLOP/s per GPU (default 600)"),
      cli::real("overlap", 0, 1, "fraction of 2D's SUMMA traffic hidden behind GEMMs (default 0.5; calibration 0)"),
      cli::integer("hidden", 1, kSide, "hidden size"),
      cli::integer("heads", 1, 1 << 16, "attention heads"),
      cli::integer("layers", 1, 1 << 12, "transformer blocks"),
      cli::integer("ffn", 1, 4 * kSide, "MLP inner size (default 4 hidden; --arch llama: 8 hidden / 3 rounded up to a "
                   "multiple of 256)"),
      cli::integer("vocab", 1, 1 << 24, "vocabulary (default 50257)"),
      cli::integer("seq", 1, kSide, "tokens per sequence"),
      cli::integer("batch", 1, 1 << 24, "global batch in sequences per step (default --gpus)"),
      cli::real("dropout", 0, 0.99, "dropout probability (default 0.1)"),
      cli::choice("precision", {"f32", "mixed", "bf16", "f64"},
                  "f32; mixed (f32 values, bf16 GEMMs and saved activations); bf16 (2-byte values); f64 (default "
                  "bf16 for a GPU cluster, f32 with --calibration)"),
      cli::choice("layout", {"2d", "1d"}, "only 2D or only 1D tensor parallelism (default both)"),
      cli::flag("runnable", "only plans Optimus runs today"),
      cli::integer("dp", 1, 1 << 20, "only layouts of this many data-parallel replicas"),
      cli::integer("pp", 1, 1 << 12, "only layouts of this many pipeline stages"),
      cli::integer("max-micro-batches", 1, 1 << 16, "largest micro-batch count tried (default 64)"),
      cli::integer("top", 1, 1 << 20, "plans printed (default 10)"),
      cli::output_file("json", "write the result (every feasible plan) as JSON"),
  };
  for (cli::Spec& s : cli::arch_options()) specs.push_back(std::move(s));
  return specs;
}

}  // namespace optimus::apps

// The main job: a character-level GPT trained on a q x q grid (default 2 x 2, 4 MPI ranks) on an English
// text every Debian machine has. It first checks one training step's loss and gradients against the fp64
// reference, then trains in fp32 with AdamW, printing progress and memory, and ends with a generated sample.
//
//   mpirun -np 4 ./train_gpt [--q 2 | --layout 1d [--p P]] [--layers 2] [--hidden 128] [--heads 4] [--ffn 512]
//                            [--seq 64]
//                            [--batch 16] [--steps 1200] [--lr 3e-3] [--dropout 0.1] [--seed 1234] [--every 50]
//                            [--text /usr/share/common-licenses/GPL-3] [--sample 240]
//                            [--device cpu|sim|cuda] [--device-memory SIZE] [--device-bandwidth GB/s]
//                            [--gemm f32|bf16] [--in-process N] [--offload none|optimizer|spill|spill+activations]
//                            [--offload-update device|host]
//                            [--micro-batches M] [--recompute none|selective|full]
//                            [--pp S] [--schedule gpipe|1f1b|interleaved|wave|zb] [--chunks V]
//                            [--plan auto [--calibration FILE [--cores C]]]
//                            [--save DIR] [--save-every N] [--keep K] [--resume PATH]
//                            [--init FILE] [--export FILE.safetensors|FILE.bin] [--data FILE[,VALID_FILE]]
//                            [--data-format llmc|raw] [--vocab V]
//                            [--skip-nonfinite] [--check-finite] [--timeout SECONDS]
//
// Every option is checked against its range before any work starts (--help lists them; program_options.cpp).
// --skip-nonfinite: a step whose loss or gradient norm is NaN or inf is skipped (parameters and AdamW unchanged) and
// reported, instead of stopping the run with a line naming the step; a run whose every step was skipped fails. --check-finite: every layer's output and input
// gradient is checked, and the first NaN or inf stops the run naming the layer and tensor (Execution::check_finite;
// slow: for finding where). --timeout SECONDS: the watchdog (Communicator::set_timeout; default 600, 0: off): an
// operation that waits longer stops the job with a line naming it and the ranks that have not joined.
//
// --device cuda: one GPU per rank (the node-local rank picks it), the grid's communicators NCCL ones
// (distributed_grid; needs a build with CUDA and NCCL). --device sim: the simulated device, one per rank, with its
// simulated NCCL (--device-memory: its capacity, e.g. 512MiB): the GPU path run on the CPU, the same losses as
// --device cpu. The reference check runs on a host grid either way.
// --in-process N: N ranks as threads of this one process (no mpirun) — with --device sim or cuda all sharing one
// device, as a whole grid on one GPU (RankDevice::grid).
// --gemm bf16: mixed precision (GEMMs on bf16 operands, f32 master weights and optimizer state).
// --offload (optimus/layers/offload.hpp; needs --device sim or cuda; the losses are the same bit for bit in every mode):
// optimizer: AdamW's moments live in page-locked host memory and each step streams them through the device chunk by
// chunk (layers/optimizer_offload.hpp): the device holds 8 bytes per parameter instead of 16. spill: also the
// transformer blocks' parameters and gradients, which move through two device slots while the model computes
// (layers/spill.hpp): the device holds two blocks' instead of all. spill+activations: also the activations the blocks
// save for backward. --offload-update device|host: where the offloaded AdamW update runs (default: the faster on this
// device, docs/offload.md). --device-bandwidth GB/s throttles the simulated device's host<->device copies. The memory
// line gives each kind's bytes on the device and on the host.
// --micro-batches M: each step runs forward and backward on M micro-batches of batch/M sequences, accumulating the
// gradients (the same step as one batch, less activation memory). --recompute: what each block saves for backward
// (optimus/layers/recompute.hpp): everything (none), all but the attention probabilities (selective), or only its
// input (full); the losses are those of none.
// --pp S: a pipeline of S stages, each a q x q grid (ranks = dp x S x q^2; optimus/model/gpt.hpp), running
// --schedule (default 1f1b) on the --micro-batches with --chunks model chunks per stage (interleaved and wave; default
// 2). Every schedule trains bitwise as --pp 1 does with the same micro-batches, --recompute and --gemm (AdamW's norm is
// summed in the whole model's order), and the reference check runs through the same schedule on S*V blocks; --save,
// --resume, --init and --export work as without a pipeline (a checkpoint saved by any layout resumes on any other).
// Stages compute on --device sim|cuda too (their messages on the device communicators), with every --offload (each
// stage spills its own blocks). --pp 1 is a pipeline of one stage.
// --layout 1d: the 1D (Megatron) baseline instead of q x q grids, on dp x pp groups of --p ranks each (default: ranks /
// pp, dp 1), through the same pipeline runtime; every option above but --q works with it, and its checkpoints and
// GPT-2 files load into any 2D layout.
// --plan auto: the planner's fastest layout for these ranks (apps/auto_plan.hpp, docs/planner.md) sets --q, --pp,
// --schedule, --chunks, --micro-batches, each block's recomputation and --offload, and --batch is the whole step's batch,
// which the plan's replicas share; the rates are measured first by every rank at once, or read from --calibration
// (optimus-bench calibrate's JSON, with --cores ranks computing at once). The plans' table is printed before training.
// --save DIR --save-every N: a checkpoint of the model and AdamW every N steps and at the end, each its own directory
// DIR/step_S (optimus/checkpoint/checkpoint.hpp: atomic, checksummed, loadable on any layout); --keep K keeps the
// newest K. DIR belongs to one run (optimus/checkpoint/save_directory.hpp): locked while it trains, refused when it holds
// another run's checkpoints; a run resumed at step S that finds its own later checkpoints there sets them aside in
// DIR/set_aside/K (the branch it abandons) and says so. --resume PATH: a checkpoint, or a save directory for its newest; the run continues from its step on any
// q and dp with the checkpoint's model shape, seed, --steps, --lr and global batch (the learning-rate schedule and the
// data order follow the step), so an interrupted run resumed prints what the uninterrupted one prints.
// --init FILE: start from a Hugging Face GPT-2 safetensors file (optimus/checkpoint/hf_gpt2.hpp) or an llm.c
// checkpoint (llmc_gpt2.hpp), told apart by content, or a Hugging Face Llama or BERT directory (hf_llama.hpp,
// hf_bert.hpp; config.json's model_type tells them apart); the model's shape and blocks are the file's, and --seq may
// be any length up to its positions (a learned table stays whole, its first rows trained). --export FILE:
// the trained model at the end (streamed, one tensor at a time): a GPT-2 as llm.c's checkpoint where FILE ends in .bin,
// else as safetensors; a Llama or a BERT as a new Hugging Face directory (config.json, shards of at most 5 GiB with
// their index).
// --arch llama: Llama's blocks (BlockConfig::llama: RMSNorm, rotary positions of --rope-theta, SwiGLU of --ffn, default
// 8 hidden / 3 rounded up to a multiple of what the layout splits (q^2, or p; 64 under --plan auto, which picks the
// layout after), --kv-heads key/value heads, no biases, an untied head); --arch gpt2 (the default) GPT-2's.
// --arch bert: BERT's (BlockConfig::bert), trained as a masked LM (masked_data.hpp): sequences [CLS] A [SEP] B [SEP]
// cut from the data, one in ten shorter and padded, --mask-prob of the positions (default 0.15) masked as BERT does;
// the special ids --pad-id --cls-id --sep-id --mask-id are bert-base-uncased's with --data (0, 101, 102, 103) and the
// four after the characters with --text, and must lie outside the ids the data holds (--specials-in-data: they are
// the data's tokenizer's own). No sample (--sample 0); --export DIR writes a Hugging Face BERT directory
// (BertForMaskedLM, hf_bert.hpp) and --init DIR reads one; checkpoints record the masking.
// --data FILE[,VALID_FILE]: train on token ids (llm.c's .bin with its header — version 1, uint16 ids; version 2,
// uint32 ids — or with --data-format raw nanoGPT's raw uint16 train.bin; read where used) instead of the text; the
// held-out loss is on VALID_FILE, or on FILE's last 10%. The model's vocabulary is --vocab, else --init's or the
// checkpoint's, else the tokenizer's the id width implies (GPT-2's 50257, Llama 3's 128256); the data's ids must fit it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optimus/optimus.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "optimus/programs/cli.hpp"
#include "optimus/core/host_allocator.hpp"
#include "optimus/programs/device_choice.hpp"
#include "optimus/device/rank_device.hpp"
#include "optimus/plan/build.hpp"
#include "program_options.hpp"
#include "optimus/programs/arch_options.hpp"
#include "auto_plan.hpp"
#include "checkpoint_options.hpp"
#include "memory_check.hpp"
#include "persistence.hpp"
#include "placement.hpp"
#include "gpt_data.hpp"
#include "reference_check.hpp"
#include "run_layout.hpp"
#include "sampling.hpp"
#include "stop_fault.hpp"
#include "training_loop.hpp"
#include "training_run.hpp"

namespace {

namespace ex = optimus::apps;
using ex::Places;
using ex::Setup;
using ex::Start;
using ex::Trained;

// Step 4, on rank 0: the run's header — the layout, the processor and its GEMM kernel, the data, the model, what is
// offloaded, the checkpoints set aside, the pipeline.
void print_header(const optimus::Communicator& world, const Setup& setup, const Places& places, const Start& s,
                  const ex::Placement& where) {
  const ex::Corpus& corpus = setup.corpus;
  const optimus::GptConfig& config = setup.config;
  const optimus::Grid& grid = places.training->grid();
  const optimus::plan::Layout& layout = setup.run.layout;
  std::printf("Optimus: %s %s on %s x pp %d x dp %d (%d ranks), %s, %s, GEMMs %s\n",
              corpus.chars.empty() ? "token-level" : "character-level",
              setup.masking ? "masked LM" : "GPT", places.host->describe().c_str(), layout.pp,
              grid.dp(), world.size(), grid.pipe().backend().c_str(), std::string(name_of(where.choice.kind)).c_str(),
              setup.gemm.c_str());
  const optimus::cpu::Processor processor = optimus::cpu::this_processor();
  std::printf("  %s\n  %s\n", optimus::cpu::describe(processor).c_str(),
              optimus::cpu::describe(optimus::cpu::blas_kernel(), processor).c_str());
  if (corpus.chars.empty()) {
    std::printf("  data: %s (%s), %zu tokens for training, %zu held out in %s, vocabulary %lld, unigram entropy "
                "%.3f nats/token\n",
                corpus.train_file->path().c_str(),
                std::string(optimus::checkpoint::name_of(corpus.train_file->format())).c_str(), corpus.train.size(),
                corpus.valid.size(), corpus.valid_file ? corpus.valid_file->path().c_str() : "its last 10%",
                static_cast<long long>(config.vocab), corpus.unigram_entropy);
  } else {
    std::printf("  text: %zu characters (%zu for training, %zu held out), vocabulary %lld, unigram entropy %.3f "
                "nats/char\n",
                corpus.train.size() + corpus.valid.size(), corpus.train.size(), corpus.valid.size(),
                static_cast<long long>(config.vocab), corpus.unigram_entropy);
  }
  // A learned position table longer than the sequences (read from --init) is kept whole.
  const std::string table = setup.seq < config.max_seq && !config.block.rope
                                ? " (of the table's " + std::to_string(config.max_seq) + " positions)"
                                : "";
  std::printf("  model: %s blocks, layers %lld, hidden %lld, heads %lld (%lld key/value), ffn %lld, context %lld%s, "
              "dropout %.2f, %lld parameters; batch %lld x dp %d in %lld micro-batches, recomputation %s\n",
              optimus::family_name(config.block), static_cast<long long>(config.layers),
              static_cast<long long>(config.hidden), static_cast<long long>(config.heads),
              static_cast<long long>(config.kv_heads()), static_cast<long long>(config.ffn),
              static_cast<long long>(setup.seq), table.c_str(), config.dropout,
              static_cast<long long>(config.parameter_count()),
              static_cast<long long>(setup.batch), grid.dp(), static_cast<long long>(layout.micro_batches),
              setup.planned ? optimus::plan::describe_recompute(setup.planned->layout.recompute).c_str()
                            : optimus::name_of(setup.recompute));
  if (const std::optional<optimus::MaskedLmConfig>& m = setup.masking) {
    std::printf("  masking: %.2f of the positions (of those %.0f%% MASK, %.0f%% a random id, the rest kept); special "
                "ids PAD %d, CLS %d, SEP %d, MASK %d; sequences [CLS] A [SEP] B [SEP], one in ten shorter and padded\n",
                m->probability, 100 * m->mask_share, 100 * m->random_share, m->pad_id, m->cls_id, m->sep_id,
                m->mask_id);
  }
  if (setup.run.optimizer) {
    std::printf("  offload: %s (AdamW's offloaded update on the %s)\n", optimus::name_of(layout.offload),
                setup.run.optimizer->update == optimus::OffloadUpdate::device ? "device" : "host");
  }
  if (s.taken && !s.taken->set_aside().empty()) {
    const std::string steps = optimus::checkpoint::step_names(s.taken->set_aside_steps());
    std::printf("  set aside %s of %s (this run's branch after step %llu, which it abandons) in %s\n", steps.c_str(),
                s.saving.dir.c_str(), static_cast<unsigned long long>(s.resumed.state.step), s.taken->set_aside().c_str());
  }
  const optimus::pipeline::Schedule& schedule = setup.schedule;
  if (schedule.stages > 1) {
    std::printf("  pipeline: %d stages, schedule %s, %d chunks per stage (%lld blocks each), %d micro-batches\n",
                schedule.stages, std::string(optimus::pipeline::name_of(schedule.kind)).c_str(), schedule.chunks,
                static_cast<long long>(config.layers / schedule.virtual_stages()), schedule.micro_batches);
  }
}

// Step 8, report: the held-out loss, the memory by kind and place, the peak of saved activations, the final losses and
// a generated sample, printed by rank 0. Collective over `world`.
void report(optimus::Communicator& world, const optimus::cli::Options& o, const Setup& setup, const Places& places,
            const Trained& t, double last_loss, int skipped_steps) {
  const ex::Corpus& corpus = setup.corpus;
  const optimus::GptConfig& config = setup.config;
  const optimus::Grid& grid = places.training->grid();
  const std::int64_t seq = setup.seq;  // the sample's window: the positions trained
  const double valid_loss = ex::held_out_loss(setup, grid, t.trainee);
  const std::string mem = ex::memory_line(world, grid);
  // Where the model computes: the device's memory (offloaded activations wait in host memory), or the host's.
  const optimus::MemoryPlace computes = grid.device() != nullptr ? optimus::MemoryPlace::device
                                                                 : optimus::MemoryPlace::host;
  const double peak_saved = world.all_reduce(
      static_cast<double>(grid.memory().peak(optimus::MemoryKind::activations, computes)), optimus::ReduceOp::max);
  // A masked LM generates nothing (it predicts the masked positions of a whole sequence).
  const std::string sample = setup.masking ? std::string()
                                           : ex::generate(t.trainee.next_logits, seq, corpus, config.vocab, "The ",
                                                          static_cast<int>(o.integer("sample", 240)), config.seed);
  if (world.rank() != 0) return;
  const int steps = setup.steps, first_step = t.first_step;
  std::printf("  %s\n", mem.c_str());
  std::printf("  peak of activations saved for backward: %.0f bytes per rank in %s memory (max over ranks)\n",
              peak_saved, std::string(name_of(computes)).c_str());
  if (first_step > steps) {
    std::printf("no step left to train: the checkpoint is at step %d of %d; held-out loss %.4f\n", first_step - 1,
                steps, valid_loss);
  } else if (!std::isfinite(last_loss)) {
    std::printf("final training loss: none, every step of the last interval was skipped (%d of %d steps skipped); "
                "held-out loss %.4f\n", skipped_steps, steps - first_step + 1, valid_loss);
  } else {
    std::printf("final training loss %.4f nats/%s, held-out loss %.4f (unigram entropy %.3f): %s\n", last_loss,
                corpus.chars.empty() ? "token" : "char", valid_loss, corpus.unigram_entropy,
                corpus.chars.empty()                ? "-"
                : !setup.masking                    ? (last_loss < 2.0 ? "below 2.0" : "NOT below 2.0")
                : last_loss < corpus.unigram_entropy ? "below the unigram entropy"
                                                     : "NOT below the unigram entropy");
    if (skipped_steps > 0) std::printf("  %d of %d steps skipped\n", skipped_steps, steps - first_step + 1);
  }
  if (!setup.masking) std::printf("---- sample ----\n%s\n----------------\n", sample.c_str());
}

// One rank's training run (its world: MPI's, or the in-process ranks'), in its named steps. Returns the exit status.
int train(optimus::Communicator& world, const optimus::cli::Options& o, ex::Placement& where) {
  world.set_timeout(o.timeout());  // before the grid: its communicators inherit it
  Setup setup = ex::read_setup(world, o, where);
  Places places = ex::place(world, setup);
  const Start s = ex::start(world, o, setup, places);
  ex::place_training(world, o, where, setup, places);
  const bool root = world.rank() == 0;
  if (root) print_header(world, setup, places, s, where);
  Trained t = ex::build(world, o, setup, places, s, where);
  int skipped_steps = 0;  // step 6, train
  const double last_loss = ex::train_loop(t.trainee, setup, places.training->grid(), root, t.first_step,
                                      o.has("skip-nonfinite"), skipped_steps);
  const int trained_steps = setup.steps - t.first_step + 1 - skipped_steps;
  OPTIMUS_CHECK(skipped_steps == 0 || trained_steps > 0, "every one of the ", skipped_steps,
                " steps was skipped (a NaN or inf loss or gradient norm): nothing was trained");
  if (o.has("export")) ex::export_model(o, setup, s, t, root);
  report(world, o, setup, places, t, last_loss, skipped_steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  optimus::retain_freed_host_memory();  // each step reuses the last step's pages (host_allocator.hpp)
  // The name it runs under, which its lines start with: optimus-train (the build's link to it: it trains GPT-2's,
  // Llama's and BERT's blocks) or train_gpt (its first name, kept).
  const std::string program =
      argc > 0 && std::filesystem::path(argv[0]).filename() == "optimus-train" ? "optimus-train" : "train_gpt";
  optimus::Process ctx(argc, argv);
  try {
    const optimus::cli::Options o(argc, argv, 1, optimus::apps::train_gpt_options());
    optimus::apps::Placement where{
        .choice = optimus::choose_device(o), .in_process = o.has("in-process"), .shared = nullptr, .slot = nullptr};
    return ex::run_ranks(ctx, o, where, program.c_str(),
                         [&](optimus::Communicator& world) { return train(world, o, where); });
  } catch (const optimus::cli::HelpRequested& help) {
    if (ctx.world().rank() == 0) std::printf("%s\n", help.what());
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail(program, e);
  }
}

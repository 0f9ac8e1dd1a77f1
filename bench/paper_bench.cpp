// optimus-bench paper: the Optimus paper's 64-GPU claims (Xu, Li, Gong, You 2021: on 64 GPUs of TACC Frontera, 1.48x
// Megatron's training speed, 1.78x its inference speed, 8x its largest batch) through this library's time and memory
// models (plan/time_model.hpp, plan/memory_model.hpp) on the paper's machine (plan::frontera_rtx_cluster), beside the
// paper's figures; docs/paper_claims.md explains the gaps.
//
// The setup follows the authors' benchmark (bcmk_ParallelTransformer.sh in github.com/xuqifan897/Optimus): the
// transformer layers alone, fp32, every layer's input checkpointed (full recomputation), seq 512, 24 layers, dropout;
// --gpus / tp replicas of a model-parallel group of tp ranks (--tp, each a row set: 16 as the authors' 16-GPU script
// scaled by 4, 64 the whole job): a q x q = tp grid against Megatron's 1D group of t = tp (data parallelism adds
// nothing to a replica's layers: the benchmark times them alone). Per row:
//   train   24 x (forward + backward with the forward recomputed), seconds per step
//   infer   24 x forward
//   max_b   the largest batch (sequences) whose training state — the GPT's parameters, gradients and AdamW moments
//           (vocabulary --vocab), the checkpoints, one layer's context while it recomputes and the workspace — fits
//           --memory per GPU (plan::largest_batch); kept_x: batch_x with the attention's b a s^2 probabilities held
//           as 2021's layers held them (unfused softmax: its output, the dropout's output and mask, 9 bytes per
//           element) while a layer recomputes and runs backward
//   comm%   the share of `train` that is communication (the step minus the same step on infinitely fast links)
//   2D_slow the factor on 2D's communication seconds that would make the model's ratio the paper's (train, infer):
//           equal factors mean one slower-than-modelled rate of moving 2D's bytes explains both ratios
//   dist_x  batch_x against Megatron run with --distribute-checkpointed-activations (each layer's checkpointed input
//           split over the t ranks, as the authors' own script runs: the 1D model here keeps it whole on every rank)
//
//   optimus-bench paper [--gpus 64] [--tp 16,64] [--h 2048,4096,8192] [--heads 64] [--b 96] [--s 512] [--layers 24]
//                       [--vocab 30522] [--ib-gbs 1.7,3.1] [--pcie-gbs 10] [--tflops 9] [--memory 15GiB] [--json FILE]
//                       [--arch gpt2|bert|llama]
// --arch bert: the paper's own model (BlockConfig::bert): its layers time as GPT-2's (the time model counts every
// attention's whole s^2 scores either way), and max_b holds its token types, embedding norm and masked-LM head.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "bench_options.hpp"
#include "commands.hpp"
#include "optimus/core/error.hpp"
#include "optimus/plan/cluster.hpp"
#include "optimus/plan/layout.hpp"
#include "optimus/plan/memory_model.hpp"
#include "optimus/plan/time_model.hpp"
#include "optimus/programs/arch_options.hpp"
#include "report.hpp"

namespace optimus::bench {
namespace {

// The paper's figures (its abstract) for 64 GPUs: Optimus over Megatron.
constexpr double kPaperTrain = 1.48, kPaperInfer = 1.78, kPaperBatch = 8.0;
// Bytes per attention score that 2021's unfused attention in fp32 holds for backward: the softmax's output and the
// dropout's output (4 bytes each) and its mask (1 byte); the scores themselves are freed once the softmax has run.
constexpr std::int64_t kScoreBytes = 9;

struct Seconds {
  double train, infer;
};

// One step of the blocks of `w` on `l`: the layers' forward and backward with every layer recomputed.
Seconds step_of(const plan::Layout& l, const plan::Workload& w, const plan::Cluster& c) {
  const plan::BlockSeconds block = plan::block_seconds(l, w, c);
  const auto layers = static_cast<double>(w.config.layers);
  return {layers * (block.forward + block.backward[static_cast<int>(Recompute::full)]), layers * block.forward};
}

// `c` with links that take no time: the step's compute alone.
plan::Cluster without_communication(plan::Cluster c) {
  c.intra = c.inter = plan::Link{.bandwidth = std::numeric_limits<double>::max(), .latency = 0};
  return c;
}

std::string ratio(double r) { return format("%.2f", r); }

// What every row shares: the blocks but their width, and the memory per GPU.
struct PaperSetup {
  std::int64_t heads, batch, seq, layers, vocab;
  std::uint64_t memory;
  BlockConfig block;
};

plan::Workload workload_of(const PaperSetup& s, std::int64_t hidden) {
  plan::Workload w;
  w.config.hidden = hidden;
  w.config.heads = s.heads;
  w.config.ffn = 4 * hidden;
  w.config.layers = s.layers;
  w.config.vocab = s.vocab;
  w.config.max_seq = s.seq;
  w.config.dropout = 0.1;
  w.config.block = s.block;
  w.global_batch = s.batch;
  w.seq = s.seq;
  w.element_bytes = w.saved_bytes = 4;
  return w;
}

// How the header names the blocks.
std::string blocks_named(const BlockConfig& block) {
  const std::string family = family_name(block);
  if (family == "gpt2") return "GPT-2's (LayerNorm, GELU, biases)";
  if (family == "bert") return "BERT's, the paper's own model (post-LayerNorm, exact GELU, biases, bidirectional)";
  return family + " blocks";
}

// One row's values after tp, ib and h: 1D t = tp against 2D q x q = tp on `cluster`; empty where a layout does not
// fit the shapes (`error` says why).
std::vector<std::string> compare(const PaperSetup& s, int tp, std::int64_t hidden, const plan::Cluster& cluster,
                                 std::string& error) {
  const plan::Workload w = workload_of(s, hidden);
  const int q = static_cast<int>(std::lround(std::sqrt(tp)));
  const auto layout = [&](plan::TensorParallel kind) {
    return plan::Layout{.tensor = kind,
                        .tp = tp,
                        .recompute = std::vector<Recompute>(static_cast<std::size_t>(s.layers), Recompute::full)};
  };
  const plan::Layout one = layout(plan::TensorParallel::one_d), two = layout(plan::TensorParallel::two_d);
  error = plan::shape_error(one, w).empty() ? plan::shape_error(two, w) : plan::shape_error(one, w);
  if (!error.empty()) return {};
  const Seconds a = step_of(one, w, cluster), b = step_of(two, w, cluster);
  const Seconds a0 = step_of(one, w, without_communication(cluster)),
                b0 = step_of(two, w, without_communication(cluster));
  // Per sequence a rank holds: 1D a/t heads of every sequence; 2D a/q heads of its row's sequences.
  const std::int64_t scores = s.seq * s.seq * kScoreBytes;
  // Megatron's distributed checkpoints: each layer's [s, h] input per sequence held 1/t on each rank, not whole.
  const std::int64_t distributed = -s.layers * s.seq * hidden * 4 * (tp - 1) / tp;
  const std::int64_t b1 = plan::largest_batch(one, w, s.memory, 0), b2 = plan::largest_batch(two, w, s.memory, 0),
                     k1 = plan::largest_batch(one, w, s.memory, scores * (s.heads / tp)),
                     k2 = plan::largest_batch(two, w, s.memory, scores * (s.heads / q)),
                     d1 = plan::largest_batch(one, w, s.memory, distributed);
  // The factor f on 2D's communication (its step less the step's compute) for which 1D / (compute + f comm) is the
  // paper's ratio.
  const auto slow = [](double one_d, double two_d, double two_d_compute, double paper) {
    return format("%.2f", (one_d / paper - two_d_compute) / (two_d - two_d_compute));
  };
  const auto batches = [](std::int64_t x, std::int64_t y) {
    return x > 0 ? ratio(static_cast<double>(y) / static_cast<double>(x)) : std::string("-");
  };
  return {format("%.3f", a.train), format("%.3f", b.train), ratio(a.train / b.train),
          format("%.3f", a.infer), format("%.3f", b.infer), ratio(a.infer / b.infer),
          format("%.0f", 100 * (1 - a0.train / a.train)), format("%.0f", 100 * (1 - b0.train / b.train)),
          slow(a.train, b.train, b0.train, kPaperTrain), slow(a.infer, b.infer, b0.infer, kPaperInfer),
          format("%lld", (long long)b1), format("%lld", (long long)b2), batches(b1, b2), batches(k1, k2),
          batches(d1, b2)};
}

}  // namespace

int run_paper_bench(Communicator& world, int argc, char** argv) {
  const cli::Options o(argc, argv, 2, options_of("paper"));
  world.set_timeout(o.timeout());  // --timeout: the watchdog
  const int gpus = static_cast<int>(o.integer("gpus", 64));
  const std::vector<std::int64_t> tps = o.integers("tp", "16,64");
  for (const std::int64_t tp : tps) {
    const auto q = static_cast<std::int64_t>(std::lround(std::sqrt(static_cast<double>(tp))));
    OPTIMUS_CHECK(q * q == tp && gpus % tp == 0, "paper: --tp ", tp, " must be a square (the 2D grid is q x q) ",
                  "dividing --gpus ", gpus);
  }
  const PaperSetup setup{.heads = o.integer("heads", 64),
                    .batch = o.integer("b", 96),
                    .seq = o.integer("s", 512),
                    .layers = o.integer("layers", 24),
                    .vocab = o.integer("vocab", 30522),
                    .memory = o.bytes("memory", std::uint64_t{15} << 30),
                    .block = cli::arch_of(o)};
  Report report({{"tp", 4},         {"h", 6},          {"ib_GB/s", 8},    {"1D_train_s", 10}, {"2D_train_s", 10},
                 {"train_x", 8},    {"1D_infer_s", 10}, {"2D_infer_s", 10}, {"infer_x", 8},     {"1D_comm%", 8},
                 {"2D_comm%", 8},   {"2D_slow_train", 13}, {"2D_slow_infer", 13}, {"1D_max_b", 8}, {"2D_max_b", 8},
                 {"batch_x", 8},    {"kept_x", 7},     {"dist_x", 7}});
  const plan::Cluster preset = plan::frontera_rtx_cluster(gpus, setup.memory);
  report.header(format("optimus-bench paper: the Optimus paper's claims on %d GPUs (its figures: %.2fx training, "
                       "%.2fx inference, %gx the largest batch) through the models: %d / tp replicas of a model-"
                       "parallel group of tp ranks, 2D q x q = tp against 1D t = tp (a replica's layers set the time)",
                       gpus, kPaperTrain, kPaperInfer, kPaperBatch, gpus));
  report.header(format("blocks: %lld of %s, heads %lld, seq %lld, %lld sequences per replica, fp32, dropout 0.1, "
                       "every layer recomputed; max_b: the whole model's training state (vocabulary %lld) in %.3g GiB "
                       "per GPU",
                       (long long)setup.layers, blocks_named(setup.block).c_str(), (long long)setup.heads,
                       (long long)setup.seq, (long long)setup.batch,
                       (long long)setup.vocab, static_cast<double>(setup.memory) / (1 << 30)));
  report.header("links and rates: " + preset.source + format("; here PCIe %.3g GB/s, GEMMs %.3g TFLOP/s",
                                                             o.real("pcie-gbs", 10), o.real("tflops", 9)));
  report.header("x: 2D over 1D (1D's seconds / 2D's; 2D's batch / 1D's); kept_x: batch_x with 2021's unfused "
                "attention's probabilities held while a layer recomputes; '-': no batch fits (max_b 0) or the layout "
                "does not fit the shapes");
  for (const std::int64_t tp : tps) {
    for (const double ib_gbs : o.reals("ib-gbs", "1.7,3.1")) {
      plan::Cluster cluster = preset;
      cluster.inter.bandwidth = ib_gbs * 1e9;
      cluster.intra.bandwidth = o.real("pcie-gbs", 10) * 1e9;
      cluster.gemm_flops = o.real("tflops", 9) * 1e12;
      plan::validate(cluster);
      for (const std::int64_t hidden : o.integers("h", "2048,4096,8192")) {
        std::string error;
        std::vector<std::string> values = compare(setup, static_cast<int>(tp), hidden, cluster, error);
        values.insert(values.begin(), {format("%lld", (long long)tp), format("%lld", (long long)hidden),
                                       format("%.3g", ib_gbs)});
        if (!error.empty()) {
          values.resize(18, "-");
          report.footer(format("tp %lld, h %lld: %s", (long long)tp, (long long)hidden, error.c_str()));
        }
        report.row(std::move(values));
      }
    }
  }
  report.footer(format("the paper (64 GPUs): train_x %.2f, infer_x %.2f, batch_x %g — docs/paper_claims.md compares "
                       "them and explains the gaps",
                       kPaperTrain, kPaperInfer, kPaperBatch));
  if (world.rank() == 0) {
    report.print(stdout);
    if (o.has("json")) report.write_json(o.text("json", ""), "paper");
  }
  return 0;
}

}  // namespace optimus::bench

// optimus-plan: the fastest layouts of a GPT on a cluster that fit its memory (optimus/plan/planner.hpp,
// docs/planner.md), printed as a table with the models' assumptions, and as JSON with --json.
//
//   optimus-plan --gpus 64 --gpus-per-node 8 --device-memory 80GiB --hidden 8192 --heads 64 --layers 48 --seq 2048
//                [--batch B] [--vocab V] [--ffn F] [--arch gpt2|llama [--kv-heads K] [--rope-theta T]]
//                [--precision f32|mixed|bf16|f64] [--layout 2d|1d] [--runnable]
//                [--nvlink-gbs 450] [--ib-gbs 50] [--tflops 600] [--overlap 0.5] [--host-memory SIZE]
//                [--calibration FILE [--cores C]] [--dp N] [--pp S] [--max-micro-batches 64] [--top 10] [--json FILE]
//
// Without --calibration the cluster is H100 SXM nodes (plan::h100_cluster) with the given overrides; with it, CPU ranks
// at the rates optimus-bench calibrate measured on this machine, --cores of them computing at once. Exits 1 with one
// line when nothing fits (naming the least memory per rank, or the GPU counts, that would work), 2 on a bad option.
#include <chrono>
#include <cstdio>
#include <optimus/optimus.hpp>
#include <optional>

#include "program_options.hpp"
#include "optimus/programs/arch_options.hpp"
#include "optimus/programs/cli.hpp"
#include "optimus/core/output_file.hpp"
#include "optimus/plan/plan_report.hpp"

namespace {

namespace plan = optimus::plan;
namespace cli = optimus::cli;

plan::Request request_of(const cli::Options& o) {
  plan::Request r;
  const int gpus = static_cast<int>(o.integer("gpus", 0));
  OPTIMUS_CHECK(o.has("gpus") && o.has("hidden") && o.has("heads") && o.has("layers") && o.has("seq"),
                "the plan needs --gpus, --hidden, --heads, --layers and --seq");
  const std::uint64_t memory = o.bytes("device-memory", std::uint64_t{80} << 30);
  if (o.has("calibration")) {
    r.cluster =
        plan::read_calibration(o.text("calibration", ""), gpus, static_cast<int>(o.integer("cores", gpus)), memory);
    r.cluster.gpus_per_node = static_cast<int>(o.integer("gpus-per-node", gpus));
    r.cluster.host_memory = o.bytes("host-memory", memory);
    r.cluster.overlap = o.real("overlap", 0);
  } else {
    OPTIMUS_CHECK(!o.has("cores"), "--cores needs --calibration (a GPU cluster computes on every GPU)");
    r.cluster = plan::h100_cluster(gpus, static_cast<int>(o.integer("gpus-per-node", 8)), memory);
    r.cluster.host_memory = o.bytes("host-memory", r.cluster.host_memory);
    r.cluster.intra.bandwidth = o.real("nvlink-gbs", 450) * 1e9;
    r.cluster.inter.bandwidth = o.real("ib-gbs", 50) * 1e9;
    r.cluster.gemm_flops = o.real("tflops", 600) * 1e12;
    r.cluster.overlap = o.real("overlap", 0.5);
  }
  optimus::GptConfig& c = r.workload.config;
  c.hidden = o.integer("hidden", 0);
  c.heads = o.integer("heads", 0);
  c.layers = o.integer("layers", 0);
  c.block = cli::arch_of(o);
  const bool llama = c.block != optimus::BlockConfig{};
  c.ffn = o.integer("ffn", llama ? optimus::llama_ffn(c.hidden, 256) : 4 * c.hidden);
  c.vocab = o.integer("vocab", llama ? 128256 : 50257);
  c.max_seq = o.integer("seq", 0);
  c.dropout = o.real("dropout", 0.1);
  r.workload.seq = c.max_seq;
  r.workload.global_batch = o.integer("batch", gpus);
  const std::string precision = o.text("precision", o.has("calibration") ? "f32" : "bf16");
  r.workload.element_bytes = precision == "f64" ? 8 : precision == "bf16" ? 2 : 4;
  r.workload.saved_bytes = precision == "mixed" ? 2 : r.workload.element_bytes;
  if (o.has("layout")) {
    r.only = o.text("layout", "") == "2d" ? plan::TensorParallel::two_d : plan::TensorParallel::one_d;
  }
  r.runnable_only = o.has("runnable");
  if (o.has("dp")) r.dp = static_cast<int>(o.integer("dp", 1));
  if (o.has("pp")) r.pp = static_cast<int>(o.integer("pp", 1));
  r.max_micro_batches = static_cast<int>(o.integer("max-micro-batches", 64));
  // A plan that takes a while says how far it is, on stderr, every 2 s after its first 2.
  const auto started = std::chrono::steady_clock::now();
  auto next = started + std::chrono::seconds(2);
  r.progress = [started, next](const plan::Progress& p) mutable {
    const auto now = std::chrono::steady_clock::now();
    if (now < next) return;
    next = now + std::chrono::seconds(2);
    const double seconds = std::chrono::duration<double>(now - started).count();
    if (p.phase == plan::Progress::Phase::enumerating) {
      std::fprintf(stderr, "optimus-plan: %lld candidate layouts checked against the model's shapes (%.0f s)\n",
                   static_cast<long long>(p.done), seconds);
    } else {
      std::fprintf(stderr, "optimus-plan: %lld of %lld layouts evaluated (%.0f s)\n", static_cast<long long>(p.done),
                   static_cast<long long>(p.total), seconds);
    }
  };
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  optimus::fail_writes_past_file_size_limit();
  try {
    const cli::Options o(argc, argv, 1, optimus::apps::optimus_plan_options());
    const plan::Request request = request_of(o);
    const plan::Result result = plan::plan(request);
    const optimus::cpu::Processor processor = optimus::cpu::this_processor();
    std::printf("# %s\n# %s\n", optimus::cpu::describe(processor).c_str(),
                optimus::cpu::describe(optimus::cpu::blas_kernel(), processor).c_str());
    for (const std::string& line : plan::assumptions(request)) std::printf("%s\n", line.c_str());
    std::printf(
        "# %lld layouts; %lld rejected as their model states exceed the device, %lld as no recomputation "
        "fits; %lld offload variants not tried (the layout fits without); %lld not run by Optimus yet%s\n",
        static_cast<long long>(result.enumerated), static_cast<long long>(result.pruned_states),
        static_cast<long long>(result.pruned_memory), static_cast<long long>(result.pruned_offload),
        static_cast<long long>(result.not_runnable), request.runnable_only ? " (--runnable)" : "");
    if (o.has("json")) {
      const std::string path = o.text("json", "");
      optimus::write_file(path, plan::to_json(request, result));
    }
    if (result.plans.empty()) {
      std::fflush(stdout);  // the error after what was printed, however the streams are redirected
      std::fprintf(stderr, "optimus-plan: error: %s\n", result.infeasible.c_str());
      return 1;
    }
    for (const std::string& line : plan::table(result, static_cast<std::size_t>(o.integer("top", 10)))) {
      std::printf("%s\n", line.c_str());
    }
    // The best of each tensor layout, side by side.
    for (plan::TensorParallel kind : {plan::TensorParallel::two_d, plan::TensorParallel::one_d}) {
      for (const plan::Plan& p : result.plans) {
        if (p.layout.tensor != kind) continue;
        std::printf("# best %s: %s, %.3f ms per step%s%s\n", name_of(kind), plan::describe(p.layout).c_str(),
                    1e3 * p.time.seconds, p.runnable.empty() ? "" : " (not runnable yet: ",
                    p.runnable.empty() ? "" : (p.runnable + ")").c_str());
        break;
      }
    }
    return 0;
  } catch (const cli::HelpRequested& help) {
    std::printf("%s\n", help.what());
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "optimus-plan: error: %s\n", e.what());
    return 2;
  }
}

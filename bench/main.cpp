// optimus-bench: benchmarks of Optimus, printed like nccl-tests (see bench/README.md).
//
//   mpirun -np 4 optimus-bench summa --n 1024,2048 [--ops ab,abt,atb] [--dtype f64,f32] [--json out.json]
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "optimus/comm/process.hpp"
#include "optimus/programs/cli.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/host_allocator.hpp"

int main(int argc, char** argv) {
  optimus::retain_freed_host_memory();  // steps reuse the last step's pages (host_allocator.hpp)
  optimus::Process ctx(argc, argv);
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "summa") return optimus::bench::run_summa_bench(ctx.world(), argc, argv);
    if (command == "scaling") return optimus::bench::run_scaling_bench(ctx.world(), argc, argv);
    if (command == "calibrate") return optimus::bench::run_calibrate(ctx.world(), argc, argv);
    if (command == "model") return optimus::bench::run_model(ctx.world(), argc, argv);
    if (command == "paper") return optimus::bench::run_paper_bench(ctx.world(), argc, argv);
    if (command == "layer") return optimus::bench::run_layer_bench(ctx.world(), argc, argv);
    if (command == "gpt") return optimus::bench::run_gpt_bench(ctx.world(), argc, argv);
    if (command == "activations") return optimus::bench::run_activations(ctx.world(), argc, argv);
    if (command == "checkpoint") return optimus::bench::run_checkpoint_bench(ctx.world(), argc, argv);
    if (command == "pipeline") return optimus::bench::run_pipeline_bench(ctx.world(), argc, argv);
    if (command == "offload") return optimus::bench::run_offload_bench(ctx.world(), argc, argv);
    if (command == "plan") return optimus::bench::run_plan_bench(ctx.world(), argc, argv);
    if (command == "blas") return optimus::bench::run_blas_bench(ctx.world(), argc, argv);
    if (command == "attention") return optimus::bench::run_attention_bench(ctx.world(), argc, argv);
    if (command == "sweep") return optimus::bench::run_sweep_bench(ctx.world(), argc, argv);
    const std::string usage =
        "usage: optimus-bench summa [--n LIST] [--ops ab,abt,atb] [--dtype f64,f32] [--m M] [--k K] [--warmup W]"
        " [--iters I] [--scalapack auto|on|off] [--trace FILE] [--json FILE]"
        " | optimus-bench scaling [--layout 1d|2d] [--b B] [--s S] [--h H] [--heads A] [--ffn F] [--layers L]"
        " [--dtype f32|f64] [--check auto|on|off] [--budget-gib G] [--trace FILE] [--json FILE]"
        " | optimus-bench calibrate [--json FILE] | optimus-bench model [--calibration FILE] [--h H] [--ps LIST] ..."
        " | optimus-bench paper [--gpus 64] [--tp LIST] [--h LIST] [--heads A] [--b B] [--s S] [--layers L] [--vocab V]"
        " [--ib-gbs LIST] [--pcie-gbs G] [--tflops T] [--memory SIZE] [--json FILE]"
        " | optimus-bench layer [--device cpu|sim|cuda] [--device-memory SIZE] [--q 1,2] [--b B] [--s S] [--h H]"
        " [--heads A] [--ffn F]"
        " [--layers L] [--gemm f32,tf32,bf16 (a list)] [--check auto|on|off] [--peak-n N] [--json FILE]"
        " | optimus-bench gpt (the layer options and [--vocab V])"
        " | optimus-bench activations [--h H] [--s S] [--heads A] [--ffn F] [--layers L] [--q 1,2] [--gemm f32,bf16]"
        " [--budget-gib G] [--measure on|off] [--json FILE]"
        " | optimus-bench checkpoint [--h H] [--layers L] [--heads A] [--vocab V] [--seq S] [--dir DIR] [--iters I]"
        " [--json FILE]"
        " | optimus-bench pipeline [--pp S] [--q Q] [--m M] [--schedules gpipe,1f1b,interleaved,wave,zb] [--chunks V]"
        " [--b B] [--s S] [--h H] [--heads A] [--ffn F] [--layers L] [--vocab V] [--dtype f32|f64] [--warmup W]"
        " [--iters I] [--trace FILE] [--json FILE]"
        " | optimus-bench offload [--device sim|cuda] [--device-bandwidth GB/s] [--device-memory SIZE] [--q 1,2]"
        " [--b B] [--s S] [--h H] [--heads A] [--ffn F] [--layers L] [--vocab V]"
        " [--offload none,optimizer,spill,spill+activations] [--offload-update device|host] [--chunk N]"
        " [--sweep GB/s,...] [--warmup W] [--iters I] [--largest on|off] [--max-layers L] [--trace PREFIX]"
        " [--json FILE]"
        " | optimus-bench plan [--in-process N] [--calibration FILE] [--cores C] [--memory SIZE] [--batch B] [--s S]"
        " [--h H] [--heads A] [--ffn F] [--layers L] [--vocab V] [--layout 2d|1d] [--max-micro-batches M] [--limit K]"
        " [--warmup W] [--iters I] [--json FILE]"
        " | optimus-bench blas [--n N] [--threads LIST] [--kernels LIST] [--sweeps S] [--json FILE]"
        " | optimus-bench attention [--device cpu|sim|cuda] [--b B] [--s LIST] [--heads A] [--d D] [--dropout P]"
        " [--warmup W] [--iters I] [--json FILE]"
        " | optimus-bench sweep [--members N] [--slots D] [--simulate LIST] [--m M] [--steps S] [--b B] [--s S] [--h H]"
        " [--heads A] [--layers L] [--vocab V] [--json FILE]"
        " (`optimus-bench COMMAND --help` lists a command's options; bench/README.md explains them)";
    if (command == "--help" || command == "-h") throw optimus::cli::HelpRequested(usage);
    OPTIMUS_FAIL("unknown command '", command, "'; ", usage);
  } catch (const optimus::cli::HelpRequested& help) {
    if (ctx.world().rank() == 0) std::printf("%s\n", help.what());
    return 0;
  } catch (const std::exception& e) {
    return ctx.fail("optimus-bench", e);
  }
}

// The subcommands of optimus-bench. Each returns the process exit status.
#pragma once

#include "optimus/comm/communicator.hpp"
#include "optimus/programs/cli.hpp"

namespace optimus::bench {

int run_summa_bench(Communicator& world, int argc, char** argv);
int run_scaling_bench(Communicator& world, int argc, char** argv);
int run_calibrate(Communicator& world, int argc, char** argv);
int run_model(Communicator& world, int argc, char** argv);
int run_paper_bench(Communicator& world, int argc, char** argv);
int run_layer_bench(Communicator& world, int argc, char** argv);
int run_gpt_bench(Communicator& world, int argc, char** argv);
int run_activations(Communicator& world, int argc, char** argv);
int run_checkpoint_bench(Communicator& world, int argc, char** argv);
int run_pipeline_bench(Communicator& world, int argc, char** argv);
int run_offload_bench(Communicator& world, int argc, char** argv);
int run_plan_bench(Communicator& world, int argc, char** argv);
int run_blas_bench(Communicator& world, int argc, char** argv);
int run_attention_bench(Communicator& world, int argc, char** argv);
int run_sweep_bench(Communicator& world, int argc, char** argv);

}  // namespace optimus::bench

// The command-line options that name a model's blocks (GptConfig::block), shared by train_gpt, optimus-plan and
// optimus-bench: --arch gpt2|llama|bert, and Llama's --kv-heads and --rope-theta.
#pragma once

#include <string>
#include <vector>

#include "optimus/programs/cli.hpp"
#include "optimus/config/gpt_config.hpp"

namespace optimus::cli {

// The three options' specs, for a program's option table.
std::vector<Spec> arch_options();

// The blocks they name: GPT-2's (the default), Llama's (BlockConfig::llama) of --rope-theta (default 10000) and
// --kv-heads (default --heads), or BERT's (BlockConfig::bert). --kv-heads or --rope-theta without --arch llama is
// refused.
BlockConfig arch_of(const Options& o);

// optimus::Error unless --arch, where given, names `blocks`' family (family_name): "--arch llama differs from
// <whose> blocks (bert)".
void check_arch(const Options& o, const BlockConfig& blocks, const std::string& whose);

}  // namespace optimus::cli

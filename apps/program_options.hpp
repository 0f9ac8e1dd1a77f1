// The option tables of the programs (train_gpt, optimus-plan, optimus-sweep; and the example summa_2x2) (optimus/
// programs/cli.hpp). The programs parse with them, and tests/core/test_program_options.cpp tries bad values on every
// entry.
#pragma once

#include <vector>

#include "optimus/programs/cli.hpp"

namespace optimus::apps {

std::vector<cli::Spec> summa_2x2_options();
std::vector<cli::Spec> train_gpt_options();
std::vector<cli::Spec> optimus_plan_options();
std::vector<cli::Spec> optimus_sweep_options();

// A masked LM's special ids as train_gpt's options name them (masked_data.hpp), in the order PAD, CLS, SEP, MASK.
inline constexpr const char* kSpecialIdOptions[] = {"pad-id", "cls-id", "sep-id", "mask-id"};

}  // namespace optimus::apps

// The option table of every optimus-bench command (optimus/programs/cli.hpp): name, what it takes, its range and help.
// The commands parse with them, and tests/core/test_program_options.cpp tries bad values on every entry.
#pragma once

#include <string>
#include <vector>

#include "optimus/programs/cli.hpp"

namespace optimus::bench {

// summa, scaling, calibrate, model, layer, gpt, activations, checkpoint, pipeline, offload, plan, blas.
std::vector<std::string> commands();
// The table of `command` (one of commands(), or optimus::Error).
std::vector<cli::Spec> options_of(const std::string& command);

}  // namespace optimus::bench

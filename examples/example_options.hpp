// The option tables of the example programs (optimus/core/cli.hpp). The programs parse with them, and
// tests/core/test_program_options.cpp tries bad values on every entry.
#pragma once

#include <chrono>
#include <vector>

#include "optimus/core/cli.hpp"

namespace optimus::examples {

// --timeout SECONDS (Communicator::set_timeout), and its value (0: off).
cli::Spec timeout_option();
std::chrono::milliseconds timeout_of(const cli::Options& options);

std::vector<cli::Spec> summa_2x2_options();
std::vector<cli::Spec> train_gpt_options();

}  // namespace optimus::examples

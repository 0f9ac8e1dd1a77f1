// The 1D baseline's GPT against the reference, shared by the MPI and in-process runs of test_megatron.
#pragma once

#include "optimus/comm/communicator.hpp"

namespace optimus::test {

// Over `world` as one tensor-parallel group of p ranks (heads 12, ffn 72: p = 1, 2, 3, 4).
void check_gpt_1d(Communicator& world);

}  // namespace optimus::test

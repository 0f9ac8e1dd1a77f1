// A test hook of train_gpt's: OPTIMUS_TEST_STOP=RANK:STEP stops world rank RANK in the middle of step STEP — after its
// forward and backward, before the optimizer's step, whose collectives the other ranks then wait in — as a rank
// stopped by SIGSTOP, a debugger or a swapped-out node would be: an MPI process stops itself (SIGSTOP), an in-process
// rank's thread blocks for good. The watchdog's tests use it (tests/CMakeLists.txt, "a stopped rank"); a run without
// the variable is untouched.
#pragma once

#include <optional>

namespace optimus::examples {

struct StopFault {
  int rank = 0;  // a world rank
  int step = 0;  // a training step (from 1)
};

// OPTIMUS_TEST_STOP's value; none where it is not set. Throws optimus::Error naming a malformed value.
std::optional<StopFault> stop_fault_from_environment();

// Stops here for good (see above) where `fault` names this rank and step.
void stop_if_asked(const std::optional<StopFault>& fault, int world_rank, int step, bool in_process);

}  // namespace optimus::examples

// A test hook of train_gpt's: OPTIMUS_TEST_STOP=RANK:STEP stops world rank RANK in the middle of step STEP — after its
// forward and backward, before the optimizer's step, whose collectives the other ranks then wait in (RANK:STEP:start:
// before its forward, so that a pipeline's other stages wait for its activations and gradients) — as a rank stopped by
// SIGSTOP, a debugger or a swapped-out node would be: an MPI process stops itself (SIGSTOP), an in-process rank's
// thread blocks for good. RANK:STEP:fail instead throws an optimus::Error where RANK:STEP stops, as a fault of that
// rank's own would (its device out of memory): the others are then told at once, not after the watchdog's timeout. The
// watchdog's tests use it (tests/CMakeLists.txt, "a stopped rank"; tests/sweep); a run without the variable is
// untouched.
#pragma once

#include <optional>

namespace optimus::apps {

struct StopFault {
  int rank = 0;           // a world rank
  int step = 0;           // a training step (from 1)
  bool at_start = false;  // RANK:STEP:start — before the step's operations (its neighbours in a pipeline then wait for
                          // its messages), rather than after its backward
  bool fail = false;      // RANK:STEP:fail — an error instead of a stop, after the backward
};

// OPTIMUS_TEST_STOP's value; none where it is not set. Throws optimus::Error naming a malformed value.
std::optional<StopFault> stop_fault_from_environment();

// Stops here for good (see above) where `fault` names this rank and step.
// `at_start`: whether this call is at the step's start (else after its backward).
void stop_if_asked(const std::optional<StopFault>& fault, int world_rank, int step, bool at_start, bool in_process);

}  // namespace optimus::apps

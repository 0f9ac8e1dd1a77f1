// Overlapped and blocking SUMMA give bitwise-identical results, also for a GPT training step; and random delays
// before communication calls change nothing (no deadlock, the right answer).
#pragma once

#include <string>

#include "optimus/comm/communicator.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus::test {

void check_overlap_bitwise(Communicator& world, int q);
// Its f32 part (the products, PendingProduct's async forms, a GPT step) on `grid` as it is placed.
void check_overlap_bitwise_on(const Grid& grid);
void check_random_delays(Communicator& world, int q);
// SUMMA's GEMMs poll the transfers in flight (in row tiles) exactly where the communicator needs progress calls.
void check_polling(Communicator& world, int q);
// dp replicas reduce gradients bucket by bucket during backward: bitwise the same as reducing at once.
void check_data_parallel_overlap(Communicator& world, int q);
// The same in f32 on `grid` as it is placed (dp >= 2).
void check_data_parallel_overlap_on(const Grid& grid);
// SUMMA records one compute span per step into a grid's Timeline, and the Chrome trace holds every rank's.
// Writes the trace to `path`, which must be unique to this process (every MPI rank runs in-process cases).
void check_timeline(Communicator& world, int q, const std::string& path);

}  // namespace optimus::test

// Internal to comm: how the watchdog tells that a rank has stopped calling its communicators — the clock the ranks'
// last-call times are kept on, and the phrase that names such a rank (mpi_communicator.cpp, in_process_slots.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "optimus/core/error.hpp"

namespace optimus::detail {

// Nanoseconds of the monotonic clock (steady_clock: CLOCK_MONOTONIC, one clock for every process of a node).
inline std::uint64_t monotonic_ns() {
  const auto since_epoch = std::chrono::steady_clock::now().time_since_epoch();
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count());
}

// "; world rank 1 on node3 has made no MPI call for 3.1 s (stopped?)": `where` is "" or " on HOST", `calls` names what
// the rank makes ("MPI", "communication").
inline std::string idle_rank_text(int world_rank, const std::string& where, const char* calls, double idle_seconds) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", idle_seconds);
  return concat("; world rank ", world_rank, where, " has made no ", calls, " call for ", seconds, " s (stopped?)");
}

}  // namespace optimus::detail

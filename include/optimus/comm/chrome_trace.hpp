// Every rank's Timeline (core/timeline.hpp) in one Chrome trace (chrome://tracing, Perfetto).
#pragma once

#include <string>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/timeline.hpp"

namespace optimus {

// Collective over `comm`: rank 0 writes every rank's spans as a Chrome trace (pid = rank, one thread per kind).
void write_chrome_trace(const Timeline& timeline, Communicator& comm, const std::string& path);

}  // namespace optimus

// Collective checks shared by the MPI and in-process suites: results and exact traffic counters.
#pragma once

#include "optimus/comm/communicator.hpp"

namespace optimus::test {

// Every operation of the Communicator interface on `comm`, checked with doctest (callable from threads).
void check_collectives(Communicator& comm);

// all_to_all, fixed and variable (empty blocks among them), and its refusals; part of check_collectives.
void check_all_to_all(Communicator& comm);

// Counters follow the convention of stats.hpp exactly.
void check_counters(Communicator& comm);

// Non-blocking operations on two communicators may be waited on in any order without deadlock.
void check_nonblocking(Communicator& comm);

// split() builds sub-communicators ordered by (key, rank), and bad arguments are refused.
void check_split_and_errors(Communicator& comm);

}  // namespace optimus::test

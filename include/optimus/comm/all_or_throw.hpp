// One outcome for every rank: work that may fail on some ranks only (reading a file one rank holds, a check on
// local data) ends the same way everywhere.
//
//   all_or_throw({&grid.grid(), &grid.dp_comm()}, [&] { read_my_shard(); });
//
// runs the work, then agrees over each communicator in turn (one all-reduce each, and broadcasts only after a
// failure): if it threw on any rank, every rank throws the same optimus::Error — the message of the first failing
// rank — instead of one rank leaving while the others wait for it in their next collective. Agreeing over a grid and
// then over its data-parallel communicator reaches every rank of a dp x q x q job. The work itself must not call
// collectives on these communicators (a failing rank would leave them unmatched).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "optimus/comm/communicator.hpp"

namespace optimus {

// The message of the lowest rank of `comm` that has one, on every rank; none where no rank has one.
std::optional<std::string> first_failure(Communicator& comm, const std::optional<std::string>& mine);

void all_or_throw(const std::vector<Communicator*>& comms, const std::function<void()>& work);

// Collective over `comm`: every rank takes the CPU GEMM backend's working memory (cpu::prepare_gemm; the in-process
// ranks of one process together, each multiplying on a thread of its own, each holding its buffer until all have
// one), and all agree on the outcome: running out of memory is one error on every rank before any
// work (OpenBLAS would retry a failed allocation in its first product forever). Grid::create, the 1D groups and the
// planner's calibration call it first.
void prepare_gemm_together(Communicator& comm);

// The same for work that some ranks do in steps between collectives all ranks join (rank 0 writing a file while the
// grid gathers its tensors): attempt() runs a step where `active`, keeps the first failure and skips the later steps;
// agree() then throws it on every rank.
class DeferredFailure {
 public:
  explicit DeferredFailure(bool active) : active_(active) {}
  void attempt(const std::function<void()>& step);
  void agree(const std::vector<Communicator*>& comms) const;

 private:
  bool active_;
  std::optional<std::string> failure_;
};

}  // namespace optimus

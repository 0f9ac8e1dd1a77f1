// optimus::sweep's runtime: one rank's loop that trains the members of a sweep at once (docs/design.md, "Sweeps").
//
// A slot is a rank, or the q x q ranks of a 2D grid (Optimus's 2D inside HYDRA's task parallelism); each member is a
// pipeline with one stage per slot (stage k of every member on slot k), so a member's step is the chain HYDRA's is —
// its forward through the slots in order, its backward back — and each slot holds its stage of every member. The loop
// runs, on each slot, whichever member's next operation has its input (message-driven: nothing waits while another
// member could compute), the scheduler choosing among them:
//   lrtf        : Sharded-LRTF, the member with the longest remaining training time (MemberSteps::remaining, which
//                 counts whole steps: a step's work trains nothing until its end); between equal ones, the member with
//                 the most operations of its step run here (nearest its step's end: its activations are freed and its
//                 end reached soonest, as 1F1B prefers backwards — preferring the fewest ran every member's forward
//                 before any backward, and the slots idled at each round of steps' ends);
//   round_robin : the next member after the one that ran last, in member order;
//   model_parallel (and pipeline, whose members the caller builds with a pipeline schedule of m micro-batches): one
//                member at a time, in member order, every step of it before the next one starts.
// Ties go to the lower member index. A member's operations run in its schedule's order whatever the interleaving, so
// each member trains bitwise as it does alone (Gpt::TrainStep).
//
// A step's end is collective over the member's ranks where it saves (and, in a slot of several ranks, over the slot's),
// so that no rank waits in one while another still computes for it, and no two ranks wait in different ones, rank 0
// coordinates them (the rest of the end — the loss over the pipeline, wte's parts, the optimizer's global norm — runs
// as the member's last operations without waiting on another slot: Gpt::begin_step's exchanged end): every rank tells it (a one-byte message) when a member's operations of the step have
// run there, and it ends the members in the order they became done everywhere, telling every slot. In a slot of
// several ranks, its first rank (the leader) chooses each operation and passes on each end, and the others run that
// one sequence: each operation's collectives and each end then reach every rank in a consistent order.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "optimus/comm/communicator.hpp"
#include "optimus/core/error.hpp"
#include "optimus/sweep/schedule.hpp"

namespace optimus::sweep {

// One member's training as a rank's loop drives it: its stage of the member's pipeline on this slot. The program's
// (optimus-sweep: train_gpt's step over Gpt::TrainStep) or a test's.
class MemberSteps {
 public:
  virtual ~MemberSteps() = default;
  // Whether steps are left (false once the last one ended, or the member stopped); the same on every rank of the
  // member after each end().
  virtual bool more() const = 0;
  // Starts the next step (its learning rate, batch and operations); local to this rank.
  virtual void begin() = 0;
  // Whether every operation of the step on this rank has run.
  virtual bool operations_done() const = 0;
  // Whether the next operation's input is here; never blocks.
  virtual bool ready() = 0;
  virtual void run_next() = 0;
  // The watchdog, when the loop has found the next operation not ready for longer than the timeout: throws its error
  // for what that operation waits for (Request::expire: the message, its communicator, the ranks it waits for).
  [[noreturn]] virtual void expire() = 0;
  // The step's end, after operations_done(): collective over the member's ranks.
  virtual void end() = 0;
  // Sharded-LRTF's key: the remaining training time, in a unit common to the sweep, the same on every rank.
  virtual double remaining() const = 0;
};

// A MemberSteps whose step in flight is a `Step` (Gpt::TrainStep, or anything with done(), ready() and run_next()):
// the three calls on the step in flight, which begin() sets and end() resets.
template <class Step>
class SteppedMember : public MemberSteps {
 public:
  bool operations_done() const override { return running_->done(); }
  bool ready() override { return running_->ready(); }
  void run_next() override { running_->run_next(); }
  [[noreturn]] void expire() override {
    running_->expire();
    OPTIMUS_FAIL("sweep: a member's step did not throw the watchdog's error");  // (the step's fault)
  }

 protected:
  std::optional<Step> running_;
};

// One operation as this rank ran it: whose, which step (counted from 0 in this run) and which operation of the step
// (-1: the step's end), when (seconds since the loop began).
struct OperationRun {
  int member = 0, step = 0, operation = 0;
  double start = 0, end = 0;
};

// How the loop runs: its scheduler, and the most members with a step in flight at once (each holds its activations, and
// a spilled member its two block buffers, on every slot until the step ends): `in_flight` >= 1, or 0 for all of them.
// Which members begin a step is decided from the ends alone (the same on every slot): lrtf the longest remaining,
// round-robin the next after the last one begun, model-parallel the first with steps left.
struct LoopOptions {
  Scheduler scheduler = Scheduler::lrtf;
  int in_flight = 0;
};

// Trains every member until none has steps left, on this rank, as `options` say (above); returns the operations and the
// steps' ends in the order this rank ran them. The watchdog: where `ranks` has a timeout (Communicator::set_timeout)
// and this rank has found nothing to run for longer than it — no operation ready, no end told — it throws the
// watchdog's error for what it waits for (a member's input, another slot's "done", the coordinator's "end", the slot's
// leader's next event), naming the ranks that did not join (a stopped rank: within the timeout and a poll). `ranks`:
// every rank of the slots (every member's ranks, in the same order), over which the ends are coordinated; `slot`: this
// rank's slot — itself alone, or the q x q ranks of a 2D slot. Collective over `ranks`; Scheduler::pipeline runs as
// model_parallel (its members carry the pipeline schedule).
std::vector<OperationRun> train_members(std::span<MemberSteps* const> members, const LoopOptions& options,
                                        Communicator& ranks, Communicator& slot);

}  // namespace optimus::sweep

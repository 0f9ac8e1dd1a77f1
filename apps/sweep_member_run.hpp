// One member of a sweep as optimus-sweep trains it on this rank: train_gpt's run (training_run.hpp) on the member's
// own world — the slots' ranks, the model a pipeline of one stage per slot (--q Q --pp D) —, its steps driven by the
// sweep's loop (optimus/sweep/runtime.hpp) operation by operation (Gpt::TrainStep), so that it trains bitwise as
// `train_gpt WORDS --q Q` does alone. A member whose loss or gradient norm is not finite stops alone: one line names
// it, and the loop goes on with the others.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <optimus/optimus.hpp>

#include "optimus/programs/cli.hpp"
#include "optimus/sweep/runtime.hpp"
#include "placement.hpp"
#include "stop_fault.hpp"
#include "training_loop.hpp"
#include "training_run.hpp"

namespace optimus::apps {

// What a member's training came to, the same on every rank of the member.
struct MemberOutcome {
  std::string name;
  std::int64_t parameters = 0;
  int steps = 0, trained = 0, skipped = 0;  // its steps, those trained in this run, those skipped
  int resumed = 0;                          // the step it resumed from (--resume's checkpoint; 0: none)
  double last_loss = std::numeric_limits<double>::quiet_NaN();  // the last printed interval's mean (finish())
  double held_out = std::numeric_limits<double>::quiet_NaN();   // after finish()
  std::string stopped;                      // why it stopped early ("" when it did not)
  std::string export_failed;                // why its --export failed ("" when it did not, or has none)
};

class MemberRun final : public sweep::SteppedMember<StepInFlight> {
 public:
  // Placed and started as train_gpt does from its setup (read_setup): --init's or --resume's shape adopted, --save's
  // directory taken. Collective over `world` (the member's own: every slot's ranks), which must outlive the run, as
  // must `options` (the member's words with the slots') and `where`.
  MemberRun(Communicator& world, std::string name, const cli::Options& options, const Placement& where, Setup setup);
  // Built as train_gpt builds its model: the first step checked against the reference, the model started from --init
  // or --resume. Collective over the member's world; once, before its first step.
  void build();
  // The member's setup, its shape final (--init's, --resume's) once constructed.
  const Setup& setup() const { return setup_; }
  ~MemberRun() override { running_.reset(); }  // a step in flight before the model it runs on
  MemberRun(const MemberRun&) = delete;
  MemberRun& operator=(const MemberRun&) = delete;

  bool more() const override { return outcome_.stopped.empty() && step_ <= setup_.steps; }
  // Each names the member in an error of its own (out of device memory, say).
  void begin() override;
  void run_next() override;
  void end() override;
  // Its steps left times a step's floating-point work (6 x parameters x tokens).
  double remaining() const override;

  // After training: --export, and the held-out loss. Collective over the member's world. A failed export (the same
  // error on every rank of the member) is recorded in the outcome, not thrown: the other members' still go.
  void finish();
  const MemberOutcome& outcome() const { return outcome_; }

 private:
  Communicator& world_;
  const cli::Options& options_;
  const Placement& where_;
  Setup setup_;
  Places places_;
  Start start_;
  std::optional<Trained> trained_;  // once built
  std::optional<StepLoop> loop_;
  std::optional<StopFault> stop_;  // OPTIMUS_TEST_STOP (stop_fault.hpp): the member's world rank is the sweep's
  int step_ = 1;  // the next step
  MemberOutcome outcome_;
};

}  // namespace optimus::apps

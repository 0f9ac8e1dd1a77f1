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
#include "training_loop.hpp"
#include "training_run.hpp"

namespace optimus::examples {

// What a member's training came to, the same on every rank of the member.
struct MemberOutcome {
  std::string name;
  std::int64_t parameters = 0;
  int steps = 0, trained = 0, skipped = 0;  // its steps, those trained in this run, those skipped
  double last_loss = std::numeric_limits<double>::quiet_NaN();  // the last printed interval's mean (finish())
  double held_out = std::numeric_limits<double>::quiet_NaN();   // after finish()
  std::string stopped;                      // why it stopped early ("" when it did not)
};

class MemberRun final : public sweep::SteppedMember<StepInFlight> {
 public:
  // Placed, started and built as train_gpt does from its setup (read_setup: the first step checked against the
  // reference, --resume and --save as the member's options say). Collective over `world` (the member's own: every
  // slot's ranks), which must outlive the run; `options` are the member's words with the slots'.
  MemberRun(Communicator& world, std::string name, const cli::Options& options, const Placement& where, Setup setup);
  ~MemberRun() override { running_.reset(); }  // a step in flight before the model it runs on
  MemberRun(const MemberRun&) = delete;
  MemberRun& operator=(const MemberRun&) = delete;

  bool more() const override { return outcome_.stopped.empty() && step_ <= setup_.steps; }
  void begin() override;
  void end() override;
  // Its steps left times a step's floating-point work (6 x parameters x tokens).
  double remaining() const override;

  // After training: --export, and the held-out loss. Collective over the member's world.
  void finish();
  const MemberOutcome& outcome() const { return outcome_; }

 private:
  Communicator& world_;
  const cli::Options& options_;
  Setup setup_;
  Places places_;
  Start start_;
  Trained trained_;
  std::optional<StepLoop> loop_;
  int step_ = 1;  // the next step
  MemberOutcome outcome_;
};

// Before any member is built: each member's device memory on a slot while its step is in flight — the memory model's
// (plan/memory_model.hpp) for its stage that needs the most, with the member's offload — against the slot's `capacity`
// in bytes. optimus::Error naming the sweep file (`where`), the member, its bytes by kind and the slot's where a member
// does not fit even alone (then no --in-flight helps: spill, more slots or a larger device). What several members in
// flight and the others' embeddings add is the device's to refuse, in the step that meets it.
void check_members_fit(const std::string& where, const std::vector<std::string>& names,
                       const std::vector<Setup>& setups, std::uint64_t capacity);

}  // namespace optimus::examples

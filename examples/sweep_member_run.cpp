// A sweep member's run (sweep_member_run.hpp).
#include "sweep_member_run.hpp"

#include <cmath>
#include <cstdio>
#include <utility>

namespace optimus::examples {

MemberRun::MemberRun(Communicator& world, std::string name, const cli::Options& options, const Placement& where)
    : world_(world),
      options_(options),
      setup_(read_setup(world, options, where)),
      places_(place(world, options, where, setup_)),
      start_(start(world, options, setup_, places_)),
      trained_(build(world, options, setup_, places_, start_, where)),
      step_(trained_.first_step) {
  outcome_.name = std::move(name);
  outcome_.parameters = setup_.config.parameter_count();
  outcome_.steps = setup_.steps;
  loop_.emplace(trained_.trainee, setup_, places_.training->grid(), world.rank() == 0, options.has("skip-nonfinite"),
                "[" + outcome_.name + "] ");
}

void MemberRun::begin() {
  loop_->prepare(step_);
  running_ = trained_.trainee.begin_step(loop_->tokens(), loop_->targets(), static_cast<std::uint64_t>(step_));
}

void MemberRun::end() {
  const double loss = running_->finish();
  running_.reset();
  try {
    loop_->complete(step_, loss);
    ++outcome_.trained;
  } catch (const Error& e) {
    // A non-finite loss or gradient norm (or a failed save): the same error on every rank of the member, which stops
    // here, alone.
    outcome_.stopped = e.what();
    if (world_.rank() == 0) std::printf("[%s] stopped: %s\n", outcome_.name.c_str(), e.what());
  }
  ++step_;
}

double MemberRun::remaining() const {
  const double tokens = static_cast<double>(setup_.batch * setup_.config.max_seq);
  return static_cast<double>(setup_.steps - step_ + 1) * 6 * static_cast<double>(outcome_.parameters) * tokens;
}

void MemberRun::finish() {
  outcome_.skipped = loop_->skipped_steps();
  outcome_.last_loss = loop_->last_loss();
  if (options_.has("export") && outcome_.stopped.empty()) {
    export_model(options_, setup_, start_, trained_, world_.rank() == 0);
  }
  outcome_.held_out = held_out_loss(setup_, places_.training->grid(), trained_.trainee);
}

}  // namespace optimus::examples

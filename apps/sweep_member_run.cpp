// A sweep member's run (sweep_member_run.hpp).
#include "sweep_member_run.hpp"

#include <cmath>
#include <cstdio>
#include <utility>


namespace optimus::apps {
namespace {

// Runs `work`, a part of member `name`'s training on `world`: an error of this rank's own names the member (one that
// reports the job's failure again — another rank's, the watchdog's — goes on as it is).
template <class Work>
void as_member(const Communicator& world, const std::string& name, Work&& work) {
  try {
    work();
  } catch (const Error& e) {
    if (world.job()->failed()) throw;
    OPTIMUS_FAIL("member '", name, "': ", e.what());
  }
}

}  // namespace

MemberRun::MemberRun(Communicator& world, std::string name, const cli::Options& options, const Placement& where,
                     Setup setup)
    : world_(world),
      options_(options),
      where_(where),
      setup_(std::move(setup)),
      places_(place(world, setup_)),
      start_(start(world, options, setup_, places_)),
      stop_(stop_fault_from_environment()) {
  place_training(world, options, where, setup_, places_);
  outcome_.name = std::move(name);
  outcome_.parameters = setup_.config.parameter_count();
  outcome_.steps = setup_.steps;
}

void MemberRun::build() {
  OPTIMUS_CHECK(!trained_, "member '", outcome_.name, "' is built already");
  trained_.emplace(apps::build(world_, options_, setup_, places_, start_, where_));
  step_ = trained_->first_step;
  outcome_.resumed = step_ - 1;
  loop_.emplace(trained_->trainee, setup_, places_.training->grid(), world_.rank() == 0,
                options_.has("skip-nonfinite"), "[" + outcome_.name + "] ");
}

void MemberRun::begin() {
  as_member(world_, outcome_.name, [&] {
    stop_if_asked(stop_, world_.rank(), step_, true, where_.in_process);  // a test hook (stop_fault.hpp)
    loop_->prepare(step_);
    running_ = trained_->trainee.begin_step(loop_->batch(), static_cast<std::uint64_t>(step_),
                                            *trained_->trainee.optimizer);
  });
}

void MemberRun::run_next() {
  as_member(world_, outcome_.name, [&] { running_->run_next(); });
}

void MemberRun::end() {
  double loss = 0;
  as_member(world_, outcome_.name, [&] {
    stop_if_asked(stop_, world_.rank(), step_, false, where_.in_process);
    loss = running_->finish();
  });
  const std::vector<double> sums = running_->stage_sums();
  running_.reset();
  try {
    loop_->complete(step_, loss, sums);
    ++outcome_.trained;
  } catch (const Error& e) {
    // A non-finite loss or gradient norm (or a failed save): the same error on every rank of the member, which stops
    // here, alone. Not the job's failure (the watchdog in the update's collectives, another rank's error): that ends
    // the sweep, as it would in any operation.
    if (world_.job()->failed()) throw;
    outcome_.stopped = e.what();
    if (world_.rank() == 0) std::printf("[%s] stopped: %s\n", outcome_.name.c_str(), e.what());
  }
  ++step_;
}

double MemberRun::remaining() const {
  const double tokens = static_cast<double>(setup_.batch * setup_.seq);
  return static_cast<double>(setup_.steps - step_ + 1) * 6 * static_cast<double>(outcome_.parameters) * tokens;
}

void MemberRun::finish() {
  outcome_.skipped = loop_->skipped_steps();
  outcome_.last_loss = loop_->last_loss();
  if (options_.has("export") && outcome_.stopped.empty()) {
    try {
      export_model(options_, setup_, start_, *trained_, world_.rank() == 0);
    } catch (const Error& e) {
      if (world_.job()->failed()) throw;
      outcome_.export_failed = e.what();
      if (world_.rank() == 0) std::printf("[%s] export failed: %s\n", outcome_.name.c_str(), e.what());
    }
  }
  outcome_.held_out = held_out_loss(setup_, places_.training->grid(), trained_->trainee);
}

}  // namespace optimus::apps

// A sweep member's run (sweep_member_run.hpp).
#include "sweep_member_run.hpp"

#include <cmath>
#include <cstdio>
#include <utility>

#include "optimus/plan/memory_model.hpp"

namespace optimus::examples {

MemberRun::MemberRun(Communicator& world, std::string name, const cli::Options& options, const Placement& where,
                     Setup setup)
    : world_(world),
      options_(options),
      setup_(std::move(setup)),
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
  running_ = trained_.trainee.begin_step(loop_->batch(), static_cast<std::uint64_t>(step_),
                                         *trained_.trainee.optimizer);
}

void MemberRun::end() {
  const double loss = running_->finish();
  const std::vector<double> sums = running_->stage_sums();
  running_.reset();
  try {
    loop_->complete(step_, loss, sums);
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

void check_members_fit(const std::string& where, const std::vector<std::string>& names,
                       const std::vector<Setup>& setups, std::uint64_t capacity) {
  for (std::size_t m = 0; m < setups.size(); ++m) {
    const Setup& s = setups[m];
    plan::Layout layout = s.run.layout;
    layout.recompute.assign(static_cast<std::size_t>(s.config.layers), s.recompute);
    const plan::Workload workload{.config = s.config, .global_batch = s.batch, .seq = s.config.max_seq,
                                  .element_bytes = 4, .saved_bytes = s.math == ops::GemmMath::bf16 ? 2 : 4};
    if (!plan::shape_error(layout, workload).empty()) continue;  // train_gpt's own checks name it, as it starts
    const plan::MemoryPrediction p = plan::predict_memory(layout, workload);
    const plan::KindBytes& d = p.device;
    OPTIMUS_CHECK(d.total() <= capacity, where, ": member '", names[m], "' needs ", d.total(),
                  " bytes of device memory on slot ", p.stage, " with one step in flight (the memory model's: parameters ",
                  d.parameters, ", gradients ", d.gradients, ", optimizer ", d.optimizer, ", activations ",
                  d.activations, ", workspace ", d.workspace, "; offload ", name_of(layout.offload), ") but a slot has ",
                  capacity, " (--device-memory): ",
                  layout.offload == Offload::spill_activations
                      ? "it does not fit even one block at a time: give the sweep more slots or a larger device"
                      : "spill it (--offload spill+activations), give the sweep more slots or a larger device");
  }
}

}  // namespace optimus::examples

// Gpt<Family>::train_step (model/gpt.hpp): the stage's run of its operations (gpt_stage_run.hpp), then the step's end
// (wte's two parts, the sums over the replicas, or the exchanged end), and the calls that take a step apart.
#include <algorithm>
#include <optional>
#include <utility>

#include "gpt_parts.hpp"
#include "gpt_stage_run.hpp"
#include "message_tags.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {

// wte's gradient at a step's end: the embedding's part E (on u = 0's stage) plus the head's H (on u = U-1's), formed as
// E + H with the same operation on both stages. post() sends this stage's part and receives the other's, arrived()
// tests both (never blocks), complete() adds them once arrived. Nothing to exchange where one stage holds both parts,
// on a stage holding neither, or with an untied head: complete() then adds the head's part where this stage has it.
template <class F>
class Gpt<F>::WteExchange {
 public:
  explicit WteExchange(Gpt& m) : m_(m) {
    const int stage = m_.grid_.stage(), last = m_.schedule_.virtual_stages() - 1;
    first_ = m_.schedule_.stage_of(0);
    last_ = m_.schedule_.stage_of(last);
    exchanged_ = m_.config_.block.tied_head && first_ != last_ && (stage == first_ || stage == last_);
  }

  void post() {
    if (!exchanged_) return;
    const auto numel = [](const DistMatrix<T>& x) { return static_cast<std::size_t>(x.local().numel()); };
    DistMatrix<T>& wte_grad = m_.embedding_->wte_grad();
    const int tag = pipeline::wte_tag(m_.schedule_);
    if (m_.grid_.stage() == first_) {
      head_part_.emplace(m_.grid_, wte_grad.rows(), wte_grad.cols(), MemoryKind::workspace);
      const Route out = m_.route(first_, last_, kWteLane), in = m_.route(last_, first_, kWteLane);
      received_ = in.comm->irecv(head_part_->local().data(), numel(*head_part_), dtype_of<T>, in.from_rank, tag);
      sent_ = out.comm->isend(wte_grad.local().data(), numel(wte_grad), dtype_of<T>, out.to_rank, tag);
    } else {
      const Route out = m_.route(last_, first_, kWteLane), in = m_.route(first_, last_, kWteLane);
      received_ = in.comm->irecv(wte_grad.local().data(), numel(wte_grad), dtype_of<T>, in.from_rank, tag);
      sent_ = out.comm->isend(m_.head_wte_grad_->local().data(), numel(*m_.head_wte_grad_), dtype_of<T>, out.to_rank,
                              tag);
    }
    sent_.test();  // posted now: a device send waits for its receive without holding back other channels
  }
  bool arrived() { return !exchanged_ || (received_.test() && sent_.test()); }
  // The watchdog past a poller's deadline (TrainStep::expire): the part not arrived, or not sent.
  [[noreturn]] void expire() {
    if (!received_.test()) received_.expire();
    if (!sent_.test()) sent_.expire();
    OPTIMUS_FAIL(F::name, ": wte's exchange expired with nothing in flight");
  }

  void complete() {
    if (!exchanged_) {
      if (m_.config_.block.tied_head && first_ == last_ && m_.grid_.stage() == first_) m_.add_head_wte_grad();
      return;
    }
    received_.wait();
    sent_.wait();
    if (m_.grid_.stage() == first_) {
      DistMatrix<T>& wte_grad = m_.embedding_->wte_grad();
      ops::axpby<T>(T(1), std::as_const(*head_part_).local(), T(1), wte_grad.local(), m_.grid_.queue());
      head_part_.reset();
    } else {
      m_.add_head_wte_grad();
    }
  }

 private:
  Gpt& m_;
  int first_ = 0, last_ = 0;  // the stages of u = 0 and u = U-1
  bool exchanged_ = false;    // this stage sends and receives a part
  std::optional<DistMatrix<T>> head_part_;  // on the first stage: H, received
  Request sent_, received_;
};

// The exchanged end (Gpt::begin_step with partials): three operations after the schedule's, none waiting on another
// stage. Each stage's vector [partials..., loss part] goes to every other stage over the pipe (tagged sums_tag), or
// over the sums' own channel where the pipe does not match tags.
template <class F>
class Gpt<F>::EndExchange {
 public:
  EndExchange(Gpt& m, StagePartials partials) : m_(m), partials_(std::move(partials)), wte_(m) {
    OPTIMUS_CHECK(m_.grid_.dp() == 1, F::name, "::begin_step: an exchanged end sums over one replica; the grid has ",
                  m_.grid_.dp());
  }

  bool done() const { return phase_ == Phase::ended; }

  bool ready(Step& step) {
    switch (phase_) {
      case Phase::sends: return step.sent();
      case Phase::wte: return wte_.arrived();
      case Phase::sums: return std::all_of(requests_.begin(), requests_.end(), [](Request& r) { return r.test(); });
      case Phase::ended: break;
    }
    return false;
  }

  // The watchdog past a poller's deadline (TrainStep::expire): what the next operation waits for.
  [[noreturn]] void expire(Step& step) {
    if (phase_ == Phase::sends) step.expire();
    if (phase_ == Phase::wte) wte_.expire();
    for (Request& r : requests_) {
      if (!r.test()) r.expire();
    }
    OPTIMUS_FAIL(F::name, ": the step's exchanged end expired with nothing in flight");
  }

  // `spill`: the step's spill call, ended (the blocks' gradients home) before any sum of squares reads them.
  void run_next(Step& step, detail::SpillCall<T>& spill) {
    switch (phase_) {
      case Phase::sends:
        loss_part_ = step.end();
        spill.done();
        wte_.post();
        phase_ = Phase::wte;
        return;
      case Phase::wte:
        wte_.complete();
        post_sums();
        phase_ = Phase::sums;
        return;
      case Phase::sums:
        sum_over_stages();
        phase_ = Phase::ended;
        return;
      case Phase::ended: break;
    }
    OPTIMUS_FAIL(F::name, "::TrainStep: every operation of the exchanged end has run");
  }

  // After done(): the partials and the loss summed over the stages.
  std::vector<double> sums() const { return {totals_.begin(), totals_.end() - 1}; }
  double loss() const { return totals_.back(); }

 private:
  enum class Phase { sends, wte, sums, ended };

  void post_sums() {
    mine_ = partials_();
    mine_.push_back(loss_part_);
    const int stages = m_.schedule_.stages, stage = m_.grid_.stage(), tag = pipeline::sums_tag(m_.schedule_);
    theirs_.assign(static_cast<std::size_t>(stages), std::vector<double>(mine_.size(), 0.0));
    Communicator& comm = m_.sums_channel_ ? *m_.sums_channel_ : m_.grid_.pipe();  // rank s: stage s
    for (int s = 0; s < stages; ++s) {  // every receive posted before any send
      if (s == stage) continue;
      requests_.push_back(comm.irecv(theirs_[static_cast<std::size_t>(s)].data(), mine_.size(), DType::f64, s, tag));
    }
    for (int s = 0; s < stages; ++s) {
      if (s != stage) requests_.push_back(comm.isend(mine_.data(), mine_.size(), DType::f64, s, tag));
    }
    if (!requests_.empty()) requests_.back().test();  // posted now (a device communicator's as one group)
  }

  // Added in stage order; each entry has one stage's value and zeros from the others, so the sum is that value.
  void sum_over_stages() {
    for (Request& r : requests_) r.wait();
    requests_.clear();
    theirs_[static_cast<std::size_t>(m_.grid_.stage())] = mine_;
    totals_.assign(mine_.size(), 0.0);
    for (const std::vector<double>& part : theirs_) {
      for (std::size_t i = 0; i < part.size(); ++i) totals_[i] += part[i];
    }
  }

  Gpt& m_;
  StagePartials partials_;
  WteExchange wte_;
  Phase phase_ = Phase::sends;
  double loss_part_ = 0;
  std::vector<double> mine_;                 // [partials..., loss part] of this stage
  std::vector<std::vector<double>> theirs_;  // [stage]: the same of each stage
  std::vector<Request> requests_;            // the exchange's receives, then its sends
  std::vector<double> totals_;               // [partials..., loss] summed over the stages
};

template <class F>
Gpt<F>::TrainStep::TrainStep(Gpt& model, const std::vector<int>& tokens, const std::vector<int>& targets,
                             const EncoderInputs& inputs, std::int64_t batch, std::uint64_t step,
                             StagePartials partials)
    : model_(&model),
      spill_(std::make_unique<detail::SpillCall<T>>(model.spilling())),
      step_(std::make_unique<Step>(model, tokens, targets, inputs, batch, step)),
      exchange_(partials ? std::make_unique<EndExchange>(model, std::move(partials)) : nullptr) {}

template <class F>
Gpt<F>::TrainStep::TrainStep(TrainStep&&) noexcept = default;

template <class F>
Gpt<F>::TrainStep::~TrainStep() {
  exchange_.reset();
  step_.reset();   // its contexts and blocks first,
  spill_.reset();  // then the blocks home
}

template <class F>
bool Gpt<F>::TrainStep::done() const {
  // finished, or every operation run (an exchanged end's too)
  return step_ == nullptr || (step_->done() && (!exchange_ || exchange_->done()));
}

template <class F>
bool Gpt<F>::TrainStep::ready() {
  OPTIMUS_CHECK(!done(), F::name, "::TrainStep::ready: every operation of the step has run");
  return step_->done() ? exchange_->ready(*step_) : step_->ready();
}

template <class F>
void Gpt<F>::TrainStep::run_next() {
  OPTIMUS_CHECK(!done(), F::name, "::TrainStep::run_next: every operation of the step has run");
  if (step_->done()) {
    exchange_->run_next(*step_, *spill_);
  } else {
    step_->run_next(model_->times_);
  }
}

template <class F>
void Gpt<F>::TrainStep::expire() {
  OPTIMUS_CHECK(!done(), F::name, "::TrainStep::expire: every operation of the step has run");
  if (step_->done()) exchange_->expire(*step_);
  step_->expire();
}

template <class F>
double Gpt<F>::TrainStep::finish() {
  OPTIMUS_CHECK(step_ != nullptr, F::name, "::TrainStep::finish: the step has finished");
  OPTIMUS_CHECK(done(), F::name, "::TrainStep::finish: operations of the step have not run");
  double loss = 0;
  if (exchange_) {
    loss = exchange_->loss();
    sums_ = exchange_->sums();
    exchange_.reset();
  } else {
    const double part = step_->end();
    spill_->done();
    loss = model_->finish_step(*step_, part);
  }
  step_.reset();
  spill_.reset();
  return loss;
}

template <class F>
const std::vector<double>& Gpt<F>::TrainStep::stage_sums() const {
  OPTIMUS_CHECK(step_ == nullptr && !sums_.empty(), F::name, "::TrainStep::stage_sums: an exchanged step's, after "
                "finish()");
  return sums_;
}

template <class F>
typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>& tokens, const std::vector<int>& targets,
                                              std::int64_t batch, std::uint64_t step) {
  return begin_step(tokens, targets, EncoderInputs{}, batch, step);
}

template <class F>
typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>& tokens, const std::vector<int>& targets,
                                              const EncoderInputs& inputs, std::int64_t batch, std::uint64_t step) {
  return TrainStep(*this, tokens, targets, inputs, batch, step, StagePartials());
}

template <class F>
typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>& tokens, const std::vector<int>& targets,
                                              std::int64_t batch, std::uint64_t step, StagePartials partials) {
  return begin_step(tokens, targets, EncoderInputs{}, batch, step, std::move(partials));
}

template <class F>
typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>& tokens, const std::vector<int>& targets,
                                              const EncoderInputs& inputs, std::int64_t batch, std::uint64_t step,
                                              StagePartials partials) {
  OPTIMUS_CHECK(static_cast<bool>(partials), F::name, "::begin_step: an exchanged end needs its stage's partials");
  return TrainStep(*this, tokens, targets, inputs, batch, step, std::move(partials));
}

template <class F>
double Gpt<F>::train_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                            std::uint64_t step) {
  return train_step(tokens, targets, EncoderInputs{}, batch, step);
}

template <class F>
double Gpt<F>::train_step(const std::vector<int>& tokens, const std::vector<int>& targets, const EncoderInputs& inputs,
                          std::int64_t batch, std::uint64_t step) {
  TrainStep run = begin_step(tokens, targets, inputs, batch, step);
  while (!run.done()) run.run_next();
  return run.finish();
}

template <class F>
double Gpt<F>::finish_step(Step& run, double loss) {
  WteExchange wte(*this);
  wte.post();
  wte.complete();
  run.finish_replica_sums();
  return mean_over_model(loss, run.mean());  // only u = U-1's stage has a part
}


#define OPTIMUS_INSTANTIATE(F)                                                                             \
  template Gpt<F>::TrainStep::TrainStep(Gpt<F>&, const std::vector<int>&, const std::vector<int>&,              \
                                        const EncoderInputs&, std::int64_t, std::uint64_t, StagePartials);   \
  template Gpt<F>::TrainStep::TrainStep(Gpt<F>::TrainStep&&) noexcept;                                   \
  template Gpt<F>::TrainStep::~TrainStep();                                                              \
  template bool Gpt<F>::TrainStep::done() const;                                                         \
  template bool Gpt<F>::TrainStep::ready();                                                              \
  template void Gpt<F>::TrainStep::run_next();                                                           \
  template void Gpt<F>::TrainStep::expire();                                                             \
  template double Gpt<F>::TrainStep::finish();                                                           \
  template double Gpt<F>::finish_step(Step&, double);                                                    \
  template double Gpt<F>::train_step(const std::vector<int>&, const std::vector<int>&, std::int64_t, std::uint64_t); \
  template double Gpt<F>::train_step(const std::vector<int>&, const std::vector<int>&, const EncoderInputs&,    \
                                     std::int64_t, std::uint64_t);                                            \
  template typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>&, const std::vector<int>&,      \
                                                         const EncoderInputs&, std::int64_t, std::uint64_t);  \
  template typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>&, const std::vector<int>&,      \
                                                         std::int64_t, std::uint64_t);                        \
  template typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>&, const std::vector<int>&,      \
                                                         std::int64_t, std::uint64_t, StagePartials);         \
  template typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>&, const std::vector<int>&,      \
                                                         const EncoderInputs&, std::int64_t, std::uint64_t,   \
                                                         StagePartials);                                      \
  template const std::vector<double>& Gpt<F>::TrainStep::stage_sums() const;
OPTIMUS_INSTANTIATE(TwoD<float>)
OPTIMUS_INSTANTIATE(TwoD<double>)
OPTIMUS_INSTANTIATE(OneD<float>)
OPTIMUS_INSTANTIATE(OneD<double>)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus

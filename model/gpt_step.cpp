// Gpt<Family>::train_step (model/gpt.hpp): a stage's operations in the schedule's order, the blocks handed between
// virtual stages on this stage or sent over the pipeline communicator, and the step's end (wte's two parts, the sums
// over the replicas).
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "gpt_parts.hpp"
#include "message_tags.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {

// One train_step's run of this stage's operations: the contexts in flight, the blocks handed between this stage's
// virtual stages, and the messages in flight.
template <class F>
class Gpt<F>::Step {
 public:
  Step(Gpt& model, const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
       std::uint64_t step)
      : m_(model), tokens_(tokens), targets_(targets), batch_(batch), step_(step) {
    const int m = m_.schedule_.micro_batches;
    const auto n = static_cast<std::int64_t>(tokens.size());
    OPTIMUS_CHECK(batch >= 1 && batch % m == 0 && n % batch == 0 && static_cast<std::int64_t>(targets.size()) == n,
                  F::name, "::train_step: ", n, " tokens and ", targets.size(), " targets as ", batch,
                  " sequences in ", m, " micro-batches: the micro-batches must divide the batch into whole sequences");
    micro_ = batch / m;
    seq_ = n / batch;
    rows_ = micro_ * seq_;
    OPTIMUS_CHECK(micro_ % m_.grid_.q() == 0, F::name, "::train_step: a micro-batch of ", micro_,
                  " sequences is not divisible by q = ", m_.grid_.q());
    if (!m_.channels_.empty()) expect_in_send_order();
    // The operation after which each chunk's gradients are whole: its last B, or its last B_weight (split).
    const std::vector<pipeline::Op>& ops = m_.schedule_.ops[static_cast<std::size_t>(m_.grid_.stage())];
    last_gradient_op_.assign(m_.chunks_.size(), ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].work == pipeline::Work::backward || ops[i].work == pipeline::Work::backward_weight) {
        last_gradient_op_[static_cast<std::size_t>(ops[i].chunk)] = i;
      }
    }
  }

  bool done() const { return next_ == ops().size(); }

  // Whether the next operation's input is here (never blocks): a block handed on this stage, or a receive that has
  // completed (posted now if it was not). True for an operation without one.
  bool ready() {
    const pipeline::Op& op = ops()[next_];
    const std::optional<Key> key = input_key(op);
    if (!key || source_stage(*key) == m_.grid_.stage()) return true;
    post_receive(op);
    return posted_.at(*key).request.test();
  }

  // Runs the next operation (waiting for its input), its successor's receive posted first so that the transfer
  // overlaps it; times[i] is when it ran.
  void run_next(std::vector<pipeline::Interval>& times) {
    const std::vector<pipeline::Op>& ops = this->ops();
    const std::size_t i = next_;
    if (i == 0) times.assign(ops.size(), pipeline::Interval{});
    std::optional<DistMatrix<T>> input = take_input(ops[i]);
    if (i + 1 < ops.size()) post_receive(ops[i + 1]);  // in flight while ops[i] computes
    times[i].start = since_begin();
    execute(ops[i], std::move(input), last_gradient_op_[static_cast<std::size_t>(ops[i].chunk)] == i);
    times[i].end = since_begin();
    ++next_;
  }

  // After the last operation: every send waited; returns this stage's part of the batch's mean loss (all of it on
  // u = U-1's stage).
  double end() {
    for (Request& r : sends_) r.wait();
    std::size_t expected = 0;
    for (const auto& [from, keys] : expected_) expected += keys.size();
    OPTIMUS_CHECK(done() && handed_.empty() && saved_.empty() && posted_.empty() && expected == 0, F::name, ": stage ",
                  m_.grid_.stage(), " ended its step after ", next_, " of ", ops().size(), " operations with ",
                  handed_.size(), " blocks handed over, ", posted_.size(), " receives, ", expected,
                  " expected blocks and ", saved_.size(), " contexts not consumed");
    return loss_;
  }

  // After run: the parameters outside the blocks summed over the replicas too (the blocks' are in flight or done),
  // every sum waited, and every gradient divided by dp. Nothing without replicas.
  void finish_replica_sums() {
    if (m_.grid_.dp() == 1) return;
    std::vector<ParameterRef<T>> edges;
    m_.embedding_parameters(edges);
    m_.ln_f_parameters(edges);
    sums_.finish(edges);
  }

 private:
  using Clock = std::chrono::steady_clock;
  using Key = std::tuple<int, int, bool>;  // (receiving virtual stage u, micro-batch k, gradient?)
  struct Posted {
    DistMatrix<T> block;
    Request request;  // declared after the block: destroyed (waited) first
  };

  const std::vector<pipeline::Op>& ops() const { return m_.schedule_.ops[static_cast<std::size_t>(m_.grid_.stage())]; }
  double since_begin() const { return std::chrono::duration<double>(Clock::now() - begin_).count(); }
  int last() const { return m_.schedule_.virtual_stages() - 1; }
  int virtual_stage(const pipeline::Op& op) const { return m_.chunks_[static_cast<std::size_t>(op.chunk)].virtual_stage; }
  std::size_t numel(const DistMatrix<T>& x) const { return static_cast<std::size_t>(x.local().numel()); }
  std::vector<int> slice(const std::vector<int>& ids, int k) const {
    return std::vector<int>(ids.begin() + k * rows_, ids.begin() + (k + 1) * rows_);
  }

  // The block op needs from a neighbouring virtual stage, if any: its input activation (F, from u-1) or its
  // output's gradient (B, B_input, from u+1).
  std::optional<Key> input_key(const pipeline::Op& op) const {
    const int u = virtual_stage(op);
    if (op.work == pipeline::Work::forward) return u == 0 ? std::nullopt : std::optional<Key>(Key{u, op.micro_batch, false});
    if (op.work == pipeline::Work::backward_weight || u == last()) return std::nullopt;
    return Key{u, op.micro_batch, true};
  }
  int source_stage(const Key& key) const {
    const auto& [u, k, gradient] = key;
    return m_.schedule_.stage_of(gradient ? u + 1 : u - 1);
  }

  // Where messages match by order (channels), the blocks each other stage sends here, in the order it sends them:
  // its operations' deliveries to this stage.
  void expect_in_send_order() {
    const Schedule& s = m_.schedule_;
    const int me = m_.grid_.stage();
    for (int from = 0; from < s.stages; ++from) {
      if (from == me) continue;
      for (const pipeline::Op& op : s.ops[static_cast<std::size_t>(from)]) {
        const int u = s.virtual_stage(from, op.chunk);
        if (op.work == pipeline::Work::forward && u != last() && s.stage_of(u + 1) == me) {
          expected_[from].push_back(Key{u + 1, op.micro_batch, false});
        } else if ((op.work == pipeline::Work::backward || op.work == pipeline::Work::backward_input) && u != 0 &&
                   s.stage_of(u - 1) == me) {
          expected_[from].push_back(Key{u - 1, op.micro_batch, true});
        }
      }
    }
  }

  // Posts the receive of op's input if it comes from another stage and is not posted yet — where messages match by
  // order, after the receives of every block its sender sends before it.
  void post_receive(const pipeline::Op& op) {
    const std::optional<Key> key = input_key(op);
    if (!key || source_stage(*key) == m_.grid_.stage() || posted_.count(*key) != 0) return;
    const int from = source_stage(*key);
    if (m_.channels_.empty()) {
      post_one(*key, from);
      return;
    }
    std::deque<Key>& queue = expected_[from];
    while (posted_.count(*key) == 0) {
      OPTIMUS_CHECK(!queue.empty(), F::name, ": stage ", m_.grid_.stage(), " expects no more blocks from stage ", from);
      post_one(queue.front(), from);
      queue.pop_front();
    }
  }

  void post_one(const Key& key, int from) {
    const auto& [u, k, gradient] = key;
    DistMatrix<T> block(m_.grid_, rows_, m_.config_.hidden, MemoryKind::workspace);
    const Route in = m_.route(from, m_.grid_.stage());
    Request request = in.comm->irecv(block.local().data(), numel(block), dtype_of<T>, in.from_rank,
                                     pipeline::tag_of(m_.schedule_, u, k, gradient));
    posted_.emplace(key, Posted{.block = std::move(block), .request = std::move(request)});
  }

  // op's input from a neighbour, waited for (a receive) or taken over (a block handed on this stage).
  std::optional<DistMatrix<T>> take_input(const pipeline::Op& op) {
    const std::optional<Key> key = input_key(op);
    if (!key) return std::nullopt;
    if (source_stage(*key) != m_.grid_.stage()) {
      post_receive(op);
      auto it = posted_.find(*key);
      it->second.request.wait();
      DistMatrix<T> block = std::move(it->second.block);
      posted_.erase(it);
      return block;
    }
    auto it = handed_.find(*key);
    const auto& [u, k, gradient] = *key;
    OPTIMUS_CHECK(it != handed_.end(), F::name, ": virtual stage ", u, " has no ",
                  gradient ? "gradient" : "activation", " of micro-batch ", k, " from its neighbour");
    DistMatrix<T> block = std::move(it->second);
    handed_.erase(it);
    return block;
  }

  // Hands block x to virtual stage u (its activation or its gradient): kept if u is on this stage, else sent.
  void deliver(DistMatrix<T> x, int u, int k, bool gradient) {
    const int to = m_.schedule_.stage_of(u);
    if (to == m_.grid_.stage()) {
      handed_.emplace(Key{u, k, gradient}, std::move(x));
      return;
    }
    const Route route = m_.route(m_.grid_.stage(), to);
    sends_.push_back(route.comm->isend(x.local().data(), numel(x), dtype_of<T>, route.to_rank,
                                       pipeline::tag_of(m_.schedule_, u, k, gradient)));
    sends_.back().test();  // posted now: a device send waits for its receive without holding back other channels
    sent_.push_back(std::move(x));
  }

  // `last_gradients`: this is the step's last operation on the chunk's gradients, which are then summed over replicas.
  void execute(const pipeline::Op& op, std::optional<DistMatrix<T>> input, bool last_gradients) {
    const int k = op.micro_batch, u = virtual_stage(op);
    Chunk& chunk = m_.chunks_[static_cast<std::size_t>(op.chunk)];
    Saved& s = saved_[{k, op.chunk}];
    ReplicaSums* sums = last_gradients && m_.grid_.dp() > 1 ? &sums_ : nullptr;
    if (op.work == pipeline::Work::forward) {
      const Pass pass{.step = step_, .training = true, .first_sequence = m_.grid_.dp_index() * batch_ + k * micro_};
      std::optional<DistMatrix<T>> x = std::move(input);
      loss_ += m_.forward_chunk(chunk, s.context, pass, slice(tokens_, k), slice(targets_, k), micro_,
                                static_cast<std::int64_t>(tokens_.size()), x);
      if (u != last()) deliver(*std::move(x), u + 1, k, false);
      return;
    }
    if (op.work == pipeline::Work::backward_weight) {  // the queued weight gradients, then the embedding's
      m_.weight_chunk(chunk, s.weights, sums);
      if (u == 0) m_.embedding_->backward(std::move(s.context.embedding), *s.embedding_dy);
      saved_.erase({k, op.chunk});
      return;
    }
    SplitWeights* later = op.work == pipeline::Work::backward_input ? &s.weights : nullptr;
    std::optional<DistMatrix<T>> dx = m_.backward_chunk(chunk, s.context, later, std::move(input), sums);
    if (u != 0) {
      deliver(*std::move(dx), u - 1, k, true);
    } else if (later) {
      s.embedding_dy = std::move(dx);
    }
    if (!later) saved_.erase({k, op.chunk});
  }

  Gpt& m_;
  const std::vector<int>& tokens_;
  const std::vector<int>& targets_;
  std::int64_t batch_;
  std::uint64_t step_;
  std::int64_t micro_ = 0, seq_ = 0, rows_ = 0;  // sequences per micro-batch, tokens per sequence, rows per block
  double loss_ = 0;
  std::size_t next_ = 0;                         // the next operation's index in ops()
  Clock::time_point begin_ = Clock::now();
  std::map<std::pair<int, int>, Saved> saved_;   // (k, c)
  std::map<Key, DistMatrix<T>> handed_;          // blocks kept on this stage
  std::map<Key, Posted> posted_;                 // receives in flight
  std::map<int, std::deque<Key>> expected_;      // channels: each stage's blocks for this stage not yet posted
  std::vector<Request> sends_;
  std::vector<DistMatrix<T>> sent_;              // the blocks being sent, alive until their sends complete
  std::vector<std::size_t> last_gradient_op_;    // [c]: the index of the chunk's last B or B_weight
  ReplicaSums sums_{m_.grid_};                   // the gradients' sums over the replicas
};

template <class F>
Gpt<F>::TrainStep::TrainStep(Gpt& model, const std::vector<int>& tokens, const std::vector<int>& targets,
                             std::int64_t batch, std::uint64_t step)
    : model_(&model),
      spill_(std::make_unique<detail::SpillCall<T>>(model.spilling())),
      step_(std::make_unique<Step>(model, tokens, targets, batch, step)) {}

template <class F>
Gpt<F>::TrainStep::TrainStep(TrainStep&&) noexcept = default;

template <class F>
Gpt<F>::TrainStep::~TrainStep() {
  step_.reset();   // its contexts and blocks first,
  spill_.reset();  // then the blocks home
}

template <class F>
bool Gpt<F>::TrainStep::done() const {
  return step_ == nullptr || step_->done();  // finished, or every operation run
}

template <class F>
bool Gpt<F>::TrainStep::ready() {
  OPTIMUS_CHECK(!done(), F::name, "::TrainStep::ready: every operation of the step has run");
  return step_->ready();
}

template <class F>
void Gpt<F>::TrainStep::run_next() {
  OPTIMUS_CHECK(!done(), F::name, "::TrainStep::run_next: every operation of the step has run");
  step_->run_next(model_->times_);
}

template <class F>
double Gpt<F>::TrainStep::finish() {
  OPTIMUS_CHECK(step_ != nullptr, F::name, "::TrainStep::finish: the step has finished");
  const double part = step_->end();
  spill_->done();
  const double loss = model_->finish_step(*step_, part);
  step_.reset();
  spill_.reset();
  return loss;
}

template <class F>
typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>& tokens, const std::vector<int>& targets,
                                              std::int64_t batch, std::uint64_t step) {
  return TrainStep(*this, tokens, targets, batch, step);
}

template <class F>
double Gpt<F>::train_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                            std::uint64_t step) {
  TrainStep run = begin_step(tokens, targets, batch, step);
  while (!run.done()) run.run_next();
  return run.finish();
}

template <class F>
double Gpt<F>::finish_step(Step& run, double loss) {
  const auto numel = [](const DistMatrix<T>& x) { return static_cast<std::size_t>(x.local().numel()); };
  const int stage = grid_.stage(), last = schedule_.virtual_stages() - 1;
  // wte's gradient: the embedding's part E (on u = 0's stage) plus the head's H (on u = U-1's), formed as E + H with
  // the same operation on both stages.
  const int first_stage = schedule_.stage_of(0), last_stage = schedule_.stage_of(last);
  if (config_.block.tied_head && (stage == first_stage || stage == last_stage)) {
    DistMatrix<T>& wte_grad = embedding_->wte_grad();
    if (first_stage == last_stage) {
      add_head_wte_grad();
    } else if (stage == first_stage) {
      DistMatrix<T> head_part(grid_, wte_grad.rows(), wte_grad.cols(), MemoryKind::workspace);
      const Route out = route(first_stage, last_stage), in = route(last_stage, first_stage);
      Request sent_e = out.comm->isend(wte_grad.local().data(), numel(wte_grad), dtype_of<T>, out.to_rank,
                                       pipeline::wte_tag(schedule_));
      sent_e.test();
      in.comm->recv(head_part.local().data(), numel(head_part), dtype_of<T>, in.from_rank, pipeline::wte_tag(schedule_));
      sent_e.wait();
      ops::axpby<T>(T(1), std::as_const(head_part).local(), T(1), wte_grad.local(), grid_.queue());
    } else {
      const Route out = route(last_stage, first_stage), in = route(first_stage, last_stage);
      Request sent_h = out.comm->isend(head_wte_grad_->local().data(), numel(*head_wte_grad_), dtype_of<T>,
                                       out.to_rank, pipeline::wte_tag(schedule_));
      sent_h.test();
      in.comm->recv(wte_grad.local().data(), numel(wte_grad), dtype_of<T>, in.from_rank, pipeline::wte_tag(schedule_));
      sent_h.wait();
      add_head_wte_grad();
    }
  }
  run.finish_replica_sums();
  return mean_over_model(loss);  // only u = U-1's stage has a part
}


#define OPTIMUS_INSTANTIATE(F)                                                                             \
  template Gpt<F>::TrainStep::TrainStep(Gpt<F>&, const std::vector<int>&, const std::vector<int>&, std::int64_t, \
                                        std::uint64_t);                                                   \
  template Gpt<F>::TrainStep::TrainStep(Gpt<F>::TrainStep&&) noexcept;                                   \
  template Gpt<F>::TrainStep::~TrainStep();                                                              \
  template bool Gpt<F>::TrainStep::done() const;                                                         \
  template bool Gpt<F>::TrainStep::ready();                                                              \
  template void Gpt<F>::TrainStep::run_next();                                                           \
  template double Gpt<F>::TrainStep::finish();                                                           \
  template double Gpt<F>::finish_step(Step&, double);                                                    \
  template double Gpt<F>::train_step(const std::vector<int>&, const std::vector<int>&, std::int64_t, std::uint64_t); \
  template typename Gpt<F>::TrainStep Gpt<F>::begin_step(const std::vector<int>&, const std::vector<int>&,      \
                                                         std::int64_t, std::uint64_t);
OPTIMUS_INSTANTIATE(TwoD<float>)
OPTIMUS_INSTANTIATE(TwoD<double>)
OPTIMUS_INSTANTIATE(OneD<float>)
OPTIMUS_INSTANTIATE(OneD<double>)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus

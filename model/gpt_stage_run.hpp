// Internal to the GPT (model/gpt.hpp): Gpt<Family>::Step, one train_step's run of this stage's operations — in the
// schedule's order or message-driven (pipeline/dynamic_order.hpp) — the blocks handed between virtual stages on this
// stage or sent over the pipeline's lanes. Included by model/gpt_step.cpp, which ends the step and instantiates it.
#pragma once

#include <algorithm>
#include <chrono>
#include <list>
#include <map>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "gpt_parts.hpp"
#include "message_tags.hpp"
#include "optimus/core/error.hpp"

namespace optimus {

// One train_step's run of this stage's operations: the contexts in flight, the blocks handed between this stage's
// virtual stages, and the messages in flight.
template <class F>
class Gpt<F>::Step {
 public:
  Step(Gpt& model, const std::vector<int>& tokens, const std::vector<int>& targets, const EncoderInputs& inputs,
       std::int64_t batch, std::uint64_t step)
      : m_(model), tokens_(tokens), targets_(targets), inputs_(inputs), batch_(batch), step_(step) {
    const int m = m_.schedule_.micro_batches;
    const auto n = static_cast<std::int64_t>(tokens.size());
    OPTIMUS_CHECK(batch >= 1 && batch % m == 0 && n % batch == 0 && static_cast<std::int64_t>(targets.size()) == n,
                  F::name, "::train_step: ", n, " tokens and ", targets.size(), " targets as ", batch,
                  " sequences in ", m, " micro-batches: the micro-batches must divide the batch into whole sequences");
    micro_ = batch / m;
    seq_ = n / batch;
    m_.check_inputs(inputs, batch, seq_, "train_step");
    mean_ = m_.predicted_tokens(targets, "train_step");
    sums_ = std::make_unique<ReplicaSums>(m_.grid_, mean_);
    rows_ = micro_ * seq_;
    OPTIMUS_CHECK(micro_ % m_.grid_.q() == 0, F::name, "::train_step: a micro-batch of ", micro_,
                  " sequences is not divisible by q = ", m_.grid_.q());
    if (m_.execution_.order == pipeline::Order::dynamic) order_.emplace(m_.schedule_, m_.grid_.stage());
    // The operation after which each chunk's gradients are whole: its last B, or its last B_weight (split).
    const std::vector<pipeline::Op>& ops = m_.schedule_.ops[static_cast<std::size_t>(m_.grid_.stage())];
    last_gradient_op_.assign(m_.chunks_.size(), ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].work == pipeline::Work::backward || ops[i].work == pipeline::Work::backward_weight) {
        last_gradient_op_[static_cast<std::size_t>(ops[i].chunk)] = i;
      }
    }
  }

  bool done() const { return order_ ? order_->done() : next_ == ops().size(); }
  const Mean& mean() const { return mean_; }

  // Whether the next operation's input is here (never blocks): a block handed on this stage, or a receive that has
  // completed (posted now if it was not). True for an operation without one. Dynamic: whether an operation has been
  // chosen (by this rank, or told by the stage's first rank).
  bool ready() {
    if (order_) return choose().has_value();
    const pipeline::Op& op = ops()[next_];
    const std::optional<Key> key = input_key(op);
    if (!key || source_stage(*key) == m_.grid_.stage()) return true;
    post_receive(op);
    return posted_.at(*key).request.test();
  }

  // Runs the next operation — the list's next, or the dynamic order's choice — waiting for its input, the receives
  // of what may come next posted first so that their transfers overlap it; times[i] is when list entry i ran.
  void run_next(std::vector<pipeline::Interval>& times) {
    const std::vector<pipeline::Op>& ops = this->ops();
    const std::size_t i = order_ ? decide() : next_;
    if (ran_ == 0) times.assign(ops.size(), pipeline::Interval{});
    std::optional<DistMatrix<T>> input = take_input(ops[i]);
    if (order_) {
      order_->ran(i);  // committed: the receives of what may come next, this one's successor of its kind among them
      chosen_.reset();
      post_ahead();
    } else if (i + 1 < ops.size()) {
      post_receive(ops[i + 1]);  // in flight while ops[i] computes
    }
    times[i].start = since_begin();
    execute(ops[i], std::move(input), last_gradient_op_[static_cast<std::size_t>(ops[i].chunk)] == i);
    if (m_.execution_.jitter > 0) {  // the injected delay: jitter * draw of what the operation took
      const double took = since_begin() - times[i].start;
      std::this_thread::sleep_for(std::chrono::duration<double>(
          m_.execution_.jitter * pipeline::jitter_draw(step_, m_.grid_.stage(), i) * took));
    }
    times[i].end = since_begin();
    if (!order_) ++next_;
    ++ran_;
  }

  // The watchdog for a caller that polls ready() (or sent()) with its own deadline: throws its error
  // (Request::expire) for what the step waits for — the next operation's receive, the stage's choice told, then
  // any receive or send still in flight.
  [[noreturn]] void expire() {
    if (!order_ && next_ < ops().size()) {
      const std::optional<Key> key = input_key(ops()[next_]);
      if (key && posted_.count(*key) != 0 && !posted_.at(*key).request.test()) posted_.at(*key).request.expire();
    }
    if (!decision_.test()) decision_.expire();
    for (auto& [key, posted] : posted_) {
      if (!posted.request.test()) posted.request.expire();
    }
    for (Request& r : sends_) {
      if (!r.test()) r.expire();
    }
    for (Told& t : told_) {
      if (!t.request.test()) t.request.expire();
    }
    OPTIMUS_FAIL(F::name, ": stage ", m_.grid_.stage(), " expired with no message of its step in flight");
  }

  // Whether every send of the step has completed (never blocks).
  bool sent() {
    return std::all_of(sends_.begin(), sends_.end(), [](Request& r) { return r.test(); });
  }

  // After the last operation: every send waited; returns this stage's part of the batch's mean loss (all of it on
  // u = U-1's stage).
  double end() {
    for (Request& r : sends_) r.wait();
    for (Told& t : told_) t.request.wait();
    OPTIMUS_CHECK(done() && handed_.empty() && saved_.empty() && posted_.empty(), F::name, ": stage ",
                  m_.grid_.stage(), " ended its step after ", ran_, " of ", ops().size(), " operations with ",
                  handed_.size(), " blocks handed over, ", posted_.size(), " receives and ", saved_.size(),
                  " contexts not consumed");
    return loss_;
  }

  // After run: the parameters outside the blocks summed over the replicas too (the blocks' are in flight or done),
  // every sum waited, and every gradient divided by dp. Nothing without replicas.
  void finish_replica_sums() {
    if (m_.grid_.dp() == 1) return;
    std::vector<ParameterRef<T>> edges;
    m_.embedding_parameters(edges);
    m_.ln_f_parameters(edges);
    sums_->finish(edges);
  }

 private:
  using Clock = std::chrono::steady_clock;
  using Key = std::tuple<int, int, bool>;  // (receiving virtual stage u, micro-batch k, gradient?)
  struct Posted {
    DistMatrix<T> block;
    Request request;  // declared after the block: destroyed (waited) first
  };
  struct Told {  // a choice broadcast to the stage's other ranks
    std::uint32_t index;
    Request request;
  };

  const std::vector<pipeline::Op>& ops() const { return m_.schedule_.ops[static_cast<std::size_t>(m_.grid_.stage())]; }
  double since_begin() const { return std::chrono::duration<double>(Clock::now() - begin_).count(); }
  int last() const { return m_.schedule_.virtual_stages() - 1; }
  int virtual_stage(const pipeline::Op& op) const { return m_.chunks_[static_cast<std::size_t>(op.chunk)].virtual_stage; }
  std::size_t numel(const DistMatrix<T>& x) const { return static_cast<std::size_t>(x.local().numel()); }
  // Micro-batch k's part of the batch's per-token `ids` (empty stays empty).
  std::vector<int> slice(const std::vector<int>& ids, int k) const {
    if (ids.empty()) return {};
    return std::vector<int>(ids.begin() + k * rows_, ids.begin() + (k + 1) * rows_);
  }

  // Micro-batch k's training pass: its sequences' place in the global batch, and their lengths where padded.
  Pass pass_of(int k) const {
    Pass pass = Pass::train(step_, m_.grid_.dp_index() * batch_ + k * micro_);
    const std::vector<int>& lengths = inputs_.lengths;
    if (!lengths.empty()) pass.lengths.assign(lengths.begin() + k * micro_, lengths.begin() + (k + 1) * micro_);
    return pass;
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

  // Posts the receive of op's input if it comes from another stage and is not posted yet. Each lane's messages
  // (channels) are received in micro-batch order, as every order here runs a chunk's operations of one kind.
  void post_receive(const pipeline::Op& op) {
    const std::optional<Key> key = input_key(op);
    if (!key || source_stage(*key) == m_.grid_.stage() || posted_.count(*key) != 0) return;
    post_one(*key, source_stage(*key));
  }

  // Dynamic: the receives of the next operation of each kind and chunk, posted ahead.
  void post_ahead() {
    for (const std::size_t i : order_->heads()) post_receive(ops()[i]);
  }

  // Dynamic: whether this rank waits for the stage's first rank's choices.
  bool follower() const { return m_.decisions_ && m_.decisions_->rank() != 0; }

  // Dynamic, never blocking: the operation to run next, once chosen — the first the order allows whose input is here
  // (told to the stage's other ranks), or, on those, the one told.
  std::optional<std::size_t> choose() {
    if (chosen_) return chosen_;
    post_ahead();
    if (follower()) {
      if (!awaiting_) {
        decision_ = m_.decisions_->ibroadcast(&decided_, sizeof decided_, DType::u8, 0);
        awaiting_ = true;
      }
      if (!decision_.test()) return std::nullopt;
      awaiting_ = false;
      OPTIMUS_CHECK(order_->allows(decided_), F::name, ": stage ", m_.grid_.stage(), "'s first rank chose operation ",
                    decided_, ", which this rank's order does not allow");
      chosen_ = decided_;
      return chosen_;
    }
    for (const std::size_t i : order_->allowed()) {
      if (input_here(ops()[i])) {
        chosen_ = i;
        break;
      }
    }
    if (chosen_ && m_.decisions_) {
      std::erase_if(told_, [](Told& t) { return t.request.test(); });
      told_.push_back({.index = static_cast<std::uint32_t>(*chosen_), .request = {}});
      told_.back().request = m_.decisions_->ibroadcast(&told_.back().index, sizeof(std::uint32_t), DType::u8, 0);
    }
    return chosen_;
  }

  // Dynamic: the operation to run next, waiting until one is chosen (for any awaited input, or for the choice told).
  std::size_t decide() {
    for (;;) {
      if (const std::optional<std::size_t> i = choose()) return *i;
      if (follower()) {
        decision_.wait();  // the watchdog names the choice awaited
        continue;
      }
      std::vector<Request*> awaited;
      for (const std::size_t i : order_->allowed()) {
        const std::optional<Key> key = input_key(ops()[i]);
        if (key && source_stage(*key) != m_.grid_.stage()) awaited.push_back(&posted_.at(*key).request);
      }
      OPTIMUS_CHECK(!awaited.empty(), F::name, ": stage ", m_.grid_.stage(), " has no operation it may run nor any "
                    "input it waits for, after ", ran_, " of ", ops().size(), " operations");
      wait_any(awaited, m_.grid_.pipe().timeout());
    }
  }

  // Whether op's input is here: none needed, handed on this stage, or received.
  bool input_here(const pipeline::Op& op) {
    const std::optional<Key> key = input_key(op);
    if (!key) return true;
    if (source_stage(*key) == m_.grid_.stage()) return handed_.count(*key) != 0;
    return posted_.at(*key).request.test();
  }

  void post_one(const Key& key, int from) {
    const auto& [u, k, gradient] = key;
    DistMatrix<T> block(m_.grid_, rows_, m_.config_.hidden, MemoryKind::workspace);
    const Route in = m_.route(from, m_.grid_.stage(), lane_of(u, gradient));
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
    const Route route = m_.route(m_.grid_.stage(), to, lane_of(u, gradient));
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
    ReplicaSums* sums = last_gradients && m_.grid_.dp() > 1 ? sums_.get() : nullptr;
    if (op.work == pipeline::Work::forward) {
      const Pass pass = pass_of(k);
      std::optional<DistMatrix<T>> x = std::move(input);
      loss_ += m_.forward_chunk(chunk, s.context, pass, slice(tokens_, k), slice(inputs_.token_types, k),
                                slice(targets_, k), micro_, mean_.over, x);
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
  EncoderInputs inputs_;  // a copy: token types [batch * seq] and lengths [batch], or empty
  std::int64_t batch_;
  std::uint64_t step_;
  std::int64_t micro_ = 0, seq_ = 0, rows_ = 0;  // sequences per micro-batch, tokens per sequence, rows per block
  Mean mean_;                                      // what the loss is a mean over (Gpt::predicted_tokens)
  double loss_ = 0;
  std::size_t next_ = 0;                         // static: the next operation's index in ops()
  std::size_t ran_ = 0;                          // operations run
  std::optional<pipeline::DynamicOrder> order_;  // dynamic: what may run
  std::optional<std::size_t> chosen_;            // dynamic: the operation to run next, once chosen
  std::uint32_t decided_ = 0;                    // dynamic, a follower: the choice told
  Request decision_;                             // dynamic, a follower: its receive
  bool awaiting_ = false;                        // dynamic, a follower: decision_ posted and not yet taken
  std::list<Told> told_;                         // dynamic, the first rank: its choices in flight (a list: in place)
  Clock::time_point begin_ = Clock::now();
  std::map<std::pair<int, int>, Saved> saved_;   // (k, c)
  std::map<Key, DistMatrix<T>> handed_;          // blocks kept on this stage
  std::map<Key, Posted> posted_;                 // receives in flight
  std::vector<Request> sends_;
  std::vector<DistMatrix<T>> sent_;              // the blocks being sent, alive until their sends complete
  std::vector<std::size_t> last_gradient_op_;    // [c]: the index of the chunk's last B or B_weight
  std::unique_ptr<ReplicaSums> sums_;            // the gradients' sums over the replicas
};

}  // namespace optimus

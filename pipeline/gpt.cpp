// pipeline::Gpt2D and Gpt1D (gpt.hpp): a stage's chunks of the GPT, run through the schedule's operations, with the
// blocks passed between stages over the pipeline communicator.
#include "optimus/pipeline/gpt.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "../layers/finite_check.hpp"

namespace optimus::pipeline {

template <class F>
struct Gpt<F>::Chunk {
  int virtual_stage = 0;
  LayerRange range;
  std::unique_ptr<BlockSpill<T>> spill;  // before the blocks: their home memory outlives them
  std::vector<std::unique_ptr<typename F::Block>> blocks;
};

// What one micro-batch's forward on one chunk keeps for its backward.
template <class F>
struct Gpt<F>::Saved {
  EmbeddingContext embedding;             // u = 0
  std::vector<BlockContext<T>> blocks;    // the chunk's blocks
  LayerNormContext<T> ln_f;               // u = U-1
  LmHeadContext<T> head;                  // u = U-1
  WeightGradients weights;                // split backward: B_input's queued weight gradients
  std::optional<DistMatrix<T>> embedding_dy;  // split backward, u = 0: the embedding's output gradient
};

namespace {

// One tag per message of a step: the receiving virtual stage u, the micro-batch k and the direction; after them, the
// end of step's exchange of wte's gradient parts.
int tag_of(const Schedule& s, int u, int k, bool gradient) { return (u * s.micro_batches + k) * 2 + (gradient ? 1 : 0); }
int wte_tag(const Schedule& s) { return 2 * s.virtual_stages() * s.micro_batches; }
constexpr int kMaxTag = 32767;  // the least upper bound MPI promises

template <class F>
const Schedule& checked(const Schedule& s, const typename F::Place& place, const GptConfig& config, Spill spill) {
  const Grid& grid = F::grid(place);
  OPTIMUS_CHECK(grid.pp() == s.stages, F::name, ": the grid has ", grid.pp(),
                " stages (Grid::create(world, q, pp)) but the schedule ", name_of(s.kind), " has ", s.stages);
  validate(s);
  F::validate(config, place);
  check_layers(config.layers, s.stages, s.chunks);
  OPTIMUS_CHECK(wte_tag(s) <= kMaxTag, F::name, ": ", s.micro_batches, " micro-batches on ", s.virtual_stages(),
                " virtual stages need more message tags than MPI promises (", kMaxTag, ")");
  OPTIMUS_CHECK(spill == Spill::none || !s.split_backward, F::name, ": spilling blocks with the ", name_of(s.kind),
                " schedule is not supported yet: its split backward computes weight gradients after their block has "
                "left the device");
  return s;
}

// One public call of a model whose chunks spill: done() ends it (every copy finished, the blocks home); leaving by an
// error brings the blocks home without throwing again.
template <class T>
class SpillCall {
 public:
  explicit SpillCall(std::vector<BlockSpill<T>*> spills) : spills_(std::move(spills)) {}
  SpillCall(const SpillCall&) = delete;
  SpillCall& operator=(const SpillCall&) = delete;
  ~SpillCall() {
    for (BlockSpill<T>* s : spills_) s->finish(true);
  }
  void done() {
    for (BlockSpill<T>* s : std::exchange(spills_, {})) s->finish(false);
  }

 private:
  std::vector<BlockSpill<T>*> spills_;
};

// Runs `work(b)` for the blocks b of a chunk in a pass's order (forward: 0, 1, ...; backward: the reverse), each inside
// its spill's residency when the chunk spills; `contexts` as BlockSpill::begin takes them.
template <class T, class Work>
void each_block(BlockSpill<T>* spill, std::size_t count, bool backward, std::vector<BlockContext<T>>* contexts,
                Work&& work) {
  using Direction = typename BlockSpill<T>::Direction;
  if (spill != nullptr) spill->begin(backward ? Direction::backward : Direction::forward, contexts);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t b = backward ? count - 1 - i : i;
    if (spill != nullptr) spill->enter(b);
    work(b);
    if (spill != nullptr) spill->leave(b);
  }
}

}  // namespace

template <class F>
Gpt<F>::Gpt(const Place& place, const GptConfig& config, Schedule schedule) : Gpt(place, config, schedule, Spill::none) {}

template <class F>
Gpt<F>::Gpt(const Place& place, const GptConfig& config, Schedule schedule, Spill spill)
    : place_(place), grid_(F::grid(place)), config_(config), schedule_(checked<F>(schedule, place, config, spill)) {
  const int stage = grid_.stage(), last = schedule_.virtual_stages() - 1;
  for (int c = 0; c < schedule_.chunks; ++c) {
    Chunk chunk;
    chunk.virtual_stage = schedule_.virtual_stage(stage, c);
    chunk.range = layers_of(schedule_, config_.layers, chunk.virtual_stage);
    if (spill != Spill::none) chunk.spill = std::make_unique<BlockSpill<T>>(grid_, spill);
    const ParameterTags tags = chunk.spill ? chunk.spill->home() : ParameterTags::of(grid_);
    for (std::int64_t l = chunk.range.first; l < chunk.range.first + chunk.range.count; ++l) {
      chunk.blocks.push_back(std::make_unique<typename F::Block>(place_, tags, config_, l));
    }
    if (chunk.spill) {
      std::vector<std::vector<ParameterStorage<T>>> storage(chunk.blocks.size());
      for (std::size_t b = 0; b < chunk.blocks.size(); ++b) chunk.blocks[b]->parameter_storage(storage[b]);
      chunk.spill->attach(std::move(storage));
    }
    chunks_.push_back(std::move(chunk));
  }
  const bool has_head = schedule_.stage_of(last) == stage;
  if (schedule_.stage_of(0) == stage || has_head) embedding_ = std::make_unique<typename F::Embedding>(place_, config_);
  if (has_head) {
    ln_f_ = std::make_unique<LayerNorm2D<T>>(grid_, "ln_f", config_.hidden);
    head_ = std::make_unique<typename F::Head>(place_, config_.vocab);
    head_wte_grad_ =
        std::make_unique<DistMatrix<T>>(grid_, embedding_->wte().rows(), config_.hidden, MemoryKind::gradients);
  }
  for (const ParameterRef<T>& p : parameters()) init_parameter(p, config_, grid_.device());
  if (!grid_.pipe().matches_tags()) {
    // Every ordered pair of stages that exchange blocks (neighbouring virtual stages on different stages, both ways;
    // the end stages' wte exchange), in one order on every rank: each split is collective over the pipe.
    std::set<std::pair<int, int>> pairs;
    for (int u = 1; u <= last; ++u) {
      const int a = schedule_.stage_of(u - 1), b = schedule_.stage_of(u);
      if (a != b) pairs.insert({{a, b}, {b, a}});
    }
    const int first_stage = schedule_.stage_of(0), last_stage = schedule_.stage_of(last);
    if (first_stage != last_stage) pairs.insert({{first_stage, last_stage}, {last_stage, first_stage}});
    for (const auto& [from, to] : pairs) {
      const bool member = stage == from || stage == to;
      std::unique_ptr<Communicator> c = grid_.pipe().split(member ? 0 : 1 + stage, stage == from ? 0 : 1);
      if (member) channels_.emplace(std::pair{from, to}, std::move(c));
    }
  }
}

template <class F>
auto Gpt<F>::route(int from, int to) const -> Route {
  if (channels_.empty()) return {.comm = &grid_.pipe(), .from_rank = from, .to_rank = to};
  return {.comm = channels_.at({from, to}).get(), .from_rank = 0, .to_rank = 1};
}

template <class F>
Gpt<F>::~Gpt() = default;

template <class F>
void Gpt<F>::embedding_parameters(std::vector<ParameterRef<T>>& out) {
  if (!embedding_) return;
  std::vector<ParameterRef<T>> both;
  embedding_->parameters(both);
  const bool first = schedule_.stage_of(0) == grid_.stage();
  for (ParameterRef<T>& p : both) {
    if (first || p.name == "wte") out.push_back(std::move(p));  // the head's stage holds wte only
  }
}

template <class F>
void Gpt<F>::ln_f_parameters(std::vector<ParameterRef<T>>& out) {
  if (!ln_f_) return;
  const std::size_t from = out.size();
  ln_f_->parameters(out);
  F::mark_replicated(out, from, place_);
}

template <class F>
auto Gpt<F>::parameters() -> std::vector<ParameterRef<T>> {
  std::vector<ParameterRef<T>> out;
  embedding_parameters(out);
  for (Chunk& chunk : chunks_) {
    for (auto& block : chunk.blocks) block->parameters(out);
  }
  ln_f_parameters(out);
  return out;
}

template <class F>
auto Gpt<F>::spills() const -> std::vector<const BlockSpill<T>*> {
  std::vector<const BlockSpill<T>*> out;
  for (const Chunk& chunk : chunks_) {
    if (chunk.spill) out.push_back(chunk.spill.get());
  }
  return out;
}

template <class F>
auto Gpt<F>::spilling() -> std::vector<BlockSpill<T>*> {
  std::vector<BlockSpill<T>*> out;
  for (Chunk& chunk : chunks_) {
    if (chunk.spill) out.push_back(chunk.spill.get());
  }
  return out;
}

template <class F>
NormOrder Gpt<F>::norm_order() {
  // The whole model's order: wte, wpe, block 0's tensors, ..., block L-1's, ln_f's.
  const bool first = schedule_.stage_of(0) == grid_.stage();
  std::vector<ParameterRef<T>> block;
  chunks_.front().blocks.front()->parameters(block);
  const auto per_block = static_cast<int>(block.size());
  NormOrder order{.slot = {}, .slots = 0, .across = &grid_.pipe()};
  if (embedding_) {
    order.slot.push_back(first ? 0 : -1);  // wte: counted where the embedding is
    if (first) order.slot.push_back(1);     // wpe
  }
  for (const Chunk& chunk : chunks_) {
    for (int b = 0; b < per_block * static_cast<int>(chunk.range.count); ++b) {
      order.slot.push_back(2 + static_cast<int>(chunk.range.first) * per_block + b);
    }
  }
  if (ln_f_) {
    std::vector<ParameterRef<T>> ln;
    ln_f_->parameters(ln);
    for (std::size_t k = 0; k < ln.size(); ++k) {
      order.slot.push_back(2 + static_cast<int>(config_.layers) * per_block + static_cast<int>(k));
    }
  }
  int ends = 0;
  for (int s : order.slot) ends = std::max(ends, s + 1);
  order.slots = static_cast<int>(grid_.pipe().all_reduce(static_cast<double>(ends), ReduceOp::max));
  return order;
}

template <class F>
std::map<std::string, GlobalMatrix> Gpt<F>::gather(bool gradients) {
  return gather_named(F::holders(place_), parameters(), gradients, grid_.device());
}

template <class F>
void Gpt<F>::zero_grad() {
  if (embedding_) embedding_->zero_grad();
  for (Chunk& chunk : chunks_) {
    for (auto& block : chunk.blocks) block->zero_grad();
    if (chunk.spill) chunk.spill->gradients_zeroed();
  }
  if (ln_f_) ln_f_->zero_grad();
  if (head_wte_grad_) ops::fill<T>(head_wte_grad_->local(), T(0), grid_.queue());
}

template <class F>
void Gpt<F>::set_recompute(std::int64_t layer, Recompute policy) {
  OPTIMUS_CHECK(layer >= 0 && layer < config_.layers, F::name, "::set_recompute: layer ", layer,
                " is not one of the model's ", config_.layers, " blocks");
  for (Chunk& chunk : chunks_) {
    const std::int64_t index = layer - chunk.range.first;
    if (index >= 0 && index < chunk.range.count) chunk.blocks[static_cast<std::size_t>(index)]->set_recompute(policy);
  }
}

template <class F>
void Gpt<F>::set_recompute(Recompute policy) {
  for (Chunk& chunk : chunks_) {
    for (auto& block : chunk.blocks) block->set_recompute(policy);
  }
}

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
    const std::vector<Op>& ops = m_.schedule_.ops[static_cast<std::size_t>(m_.grid_.stage())];
    last_gradient_op_.assign(m_.chunks_.size(), ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].work == Work::backward || ops[i].work == Work::backward_weight) {
        last_gradient_op_[static_cast<std::size_t>(ops[i].chunk)] = i;
      }
    }
  }

  // Runs the stage's operations; returns this stage's part of the batch's mean loss (all of it on u = U-1's stage).
  double run(std::vector<Interval>& times) {
    const std::vector<Op>& ops = m_.schedule_.ops[static_cast<std::size_t>(m_.grid_.stage())];
    times.assign(ops.size(), Interval{});
    const auto begin = Clock::now();
    const auto since = [&begin] { return std::chrono::duration<double>(Clock::now() - begin).count(); };
    for (std::size_t i = 0; i < ops.size(); ++i) {
      std::optional<DistMatrix<T>> input = take_input(ops[i]);
      if (i + 1 < ops.size()) post_receive(ops[i + 1]);  // in flight while ops[i] computes
      times[i].start = since();
      execute(ops[i], std::move(input), last_gradient_op_[static_cast<std::size_t>(ops[i].chunk)] == i);
      times[i].end = since();
    }
    for (Request& r : sends_) r.wait();
    std::size_t expected = 0;
    for (const auto& [from, keys] : expected_) expected += keys.size();
    OPTIMUS_CHECK(handed_.empty() && saved_.empty() && posted_.empty() && expected == 0, F::name, ": stage ",
                  m_.grid_.stage(), " ended its step with ", handed_.size(), " blocks handed over, ", posted_.size(),
                  " receives, ", expected, " expected blocks and ", saved_.size(), " contexts not consumed");
    return loss_;
  }

  // After run: the parameters outside the blocks summed over the replicas too (the blocks' are in flight or done),
  // every reduction waited, and every gradient divided by dp. Nothing without replicas.
  void finish_replica_sums() {
    if (m_.grid_.dp() == 1) return;
    std::vector<ParameterRef<T>> edges;
    m_.embedding_parameters(edges);
    m_.ln_f_parameters(edges);
    sum_over_replicas(edges);
    for (Request& r : pending_) r.wait();
    const T factor = T(1) / static_cast<T>(m_.grid_.dp());
    for (const ParameterRef<T>& p : summed_) scale_gradient(p, factor, m_.grid_.queue());
  }

 private:
  using Clock = std::chrono::steady_clock;
  using Key = std::tuple<int, int, bool>;  // (receiving virtual stage u, micro-batch k, gradient?)
  struct Posted {
    DistMatrix<T> block;
    Request request;  // declared after the block: destroyed (waited) first
  };

  int last() const { return m_.schedule_.virtual_stages() - 1; }
  int virtual_stage(const Op& op) const { return m_.chunks_[static_cast<std::size_t>(op.chunk)].virtual_stage; }
  std::size_t numel(const DistMatrix<T>& x) const { return static_cast<std::size_t>(x.local().numel()); }
  std::vector<int> slice(const std::vector<int>& ids, int k) const {
    return std::vector<int>(ids.begin() + k * rows_, ids.begin() + (k + 1) * rows_);
  }

  // The block op needs from a neighbouring virtual stage, if any: its input activation (F, from u-1) or its
  // output's gradient (B, B_input, from u+1).
  std::optional<Key> input_key(const Op& op) const {
    const int u = virtual_stage(op);
    if (op.work == Work::forward) return u == 0 ? std::nullopt : std::optional<Key>(Key{u, op.micro_batch, false});
    if (op.work == Work::backward_weight || u == last()) return std::nullopt;
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
      for (const Op& op : s.ops[static_cast<std::size_t>(from)]) {
        const int u = s.virtual_stage(from, op.chunk);
        if (op.work == Work::forward && u != last() && s.stage_of(u + 1) == me) {
          expected_[from].push_back(Key{u + 1, op.micro_batch, false});
        } else if ((op.work == Work::backward || op.work == Work::backward_input) && u != 0 &&
                   s.stage_of(u - 1) == me) {
          expected_[from].push_back(Key{u - 1, op.micro_batch, true});
        }
      }
    }
  }

  // Posts the receive of op's input if it comes from another stage and is not posted yet — where messages match by
  // order, after the receives of every block its sender sends before it.
  void post_receive(const Op& op) {
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
                                     tag_of(m_.schedule_, u, k, gradient));
    posted_.emplace(key, Posted{.block = std::move(block), .request = std::move(request)});
  }

  // op's input from a neighbour, waited for (a receive) or taken over (a block handed on this stage).
  std::optional<DistMatrix<T>> take_input(const Op& op) {
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
                                       tag_of(m_.schedule_, u, k, gradient)));
    sends_.back().test();  // posted now: a device send waits for its receive without holding back other channels
    sent_.push_back(std::move(x));
  }

  // Sums the gradients of `params` over the replicas: in flight (waited at once with the grid's overlap off), divided
  // by dp in finish_replica_sums.
  void sum_over_replicas(const std::vector<ParameterRef<T>>& params) {
    for (const ParameterRef<T>& p : params) {
      pending_.push_back(m_.grid_.dp_comm().iall_reduce(p.grad.data(), p.grad.data(),
                                                        static_cast<std::size_t>(p.grad.numel()), dtype_of<T>,
                                                        ReduceOp::sum));
      if (!m_.grid_.overlap()) pending_.back().wait();
      summed_.push_back(p);
    }
  }

  // A spilled block's gradients while it is resident: summed over the replicas and divided by dp before they go home.
  void average_resident(const std::vector<ParameterRef<T>>& params) {
    std::vector<Request> now;
    for (const ParameterRef<T>& p : params) {
      now.push_back(m_.grid_.dp_comm().iall_reduce(p.grad.data(), p.grad.data(),
                                                   static_cast<std::size_t>(p.grad.numel()), dtype_of<T>,
                                                   ReduceOp::sum));
    }
    for (Request& r : now) r.wait();
    const T factor = T(1) / static_cast<T>(m_.grid_.dp());
    for (const ParameterRef<T>& p : params) scale_gradient(p, factor, m_.grid_.queue());
  }

  // `last_gradients`: this is the step's last operation on the chunk's gradients, which are then summed over replicas.
  void execute(const Op& op, std::optional<DistMatrix<T>> input, bool last_gradients) {
    const int k = op.micro_batch, u = virtual_stage(op);
    Chunk& chunk = m_.chunks_[static_cast<std::size_t>(op.chunk)];
    BlockSpill<T>* spill = chunk.spill.get();
    Saved& s = saved_[{k, op.chunk}];
    const bool replicas = last_gradients && m_.grid_.dp() > 1;
    if (op.work == Work::forward) {
      const Pass pass{.step = step_, .training = true,
                      .first_sequence = m_.grid_.dp_index() * batch_ + k * micro_};
      std::optional<DistMatrix<T>> x;
      if (u == 0) {
        x = m_.embedding_->forward(slice(tokens_, k), micro_, pass, s.embedding);
        detail::check_finite(*x, "embedding forward output");
      } else {
        x = std::move(input);
      }
      s.blocks.resize(chunk.blocks.size());
      each_block(spill, chunk.blocks.size(), false, &s.blocks,
                 [&](std::size_t b) { x = chunk.blocks[b]->forward(*x, seq_, pass, s.blocks[b]); });
      if (u == last()) {
        const DistMatrix<T> y = m_.ln_f_->forward(*x, pass, s.ln_f);
        detail::check_finite(y, "ln_f forward output");
        loss_ += F::head_forward(*m_.head_, *m_.embedding_, y, slice(targets_, k),
                                   static_cast<std::int64_t>(tokens_.size()), pass, s.head);
      } else {
        deliver(*std::move(x), u + 1, k, false);
      }
      return;
    }
    if (op.work == Work::backward_weight) {  // the queued weight gradients, then the embedding's
      s.weights.run();
      if (u == 0) m_.embedding_->backward(std::move(s.embedding), *s.embedding_dy);
      saved_.erase({k, op.chunk});
      if (replicas) {
        std::vector<ParameterRef<T>> blocks;
        for (auto& block : chunk.blocks) block->parameters(blocks);
        sum_over_replicas(blocks);
      }
      return;
    }
    WeightGradients* later = op.work == Work::backward_input ? &s.weights : nullptr;
    DistMatrix<T> dy = u == last() ? head_backward(s, later) : *std::move(input);
    each_block(spill, chunk.blocks.size(), true, &s.blocks, [&](std::size_t b) {
      dy = later ? chunk.blocks[b]->backward(std::move(s.blocks[b]), dy, *later)
                 : chunk.blocks[b]->backward(std::move(s.blocks[b]), dy);
      if (!replicas || later) return;  // (a split backward's weight gradients come with B_weight)
      std::vector<ParameterRef<T>> block;
      chunk.blocks[b]->parameters(block);
      if (spill) {
        average_resident(block);
      } else {
        sum_over_replicas(block);
      }
    });
    if (u != 0) {
      deliver(std::move(dy), u - 1, k, true);
    } else if (later) {
      s.embedding_dy.emplace(std::move(dy));
    } else {
      m_.embedding_->backward(std::move(s.embedding), dy);
    }
    if (!later) saved_.erase({k, op.chunk});
  }

  // The loss's gradient through the head and ln_f: dy [N, h] for the last block.
  DistMatrix<T> head_backward(Saved& s, WeightGradients* later) {
    const DistMatrix<T>& wte = m_.embedding_->wte();
    const DistMatrix<T> dx = later == nullptr ? m_.head_->backward(std::move(s.head), wte, *m_.head_wte_grad_)
                                              : m_.head_->backward(std::move(s.head), wte, *m_.head_wte_grad_, *later);
    detail::check_finite(dx, "lm_head backward input gradient");
    DistMatrix<T> dy = later == nullptr ? m_.ln_f_->backward(std::move(s.ln_f), dx)
                                        : m_.ln_f_->backward(std::move(s.ln_f), dx, *later);
    detail::check_finite(dy, "ln_f backward input gradient");
    return dy;
  }

  Gpt& m_;
  const std::vector<int>& tokens_;
  const std::vector<int>& targets_;
  std::int64_t batch_;
  std::uint64_t step_;
  std::int64_t micro_ = 0, seq_ = 0, rows_ = 0;  // sequences per micro-batch, tokens per sequence, rows per block
  double loss_ = 0;
  std::map<std::pair<int, int>, Saved> saved_;   // (k, c)
  std::map<Key, DistMatrix<T>> handed_;          // blocks kept on this stage
  std::map<Key, Posted> posted_;                 // receives in flight
  std::map<int, std::deque<Key>> expected_;      // channels: each stage's blocks for this stage not yet posted
  std::vector<Request> sends_;
  std::vector<DistMatrix<T>> sent_;              // the blocks being sent, alive until their sends complete
  std::vector<std::size_t> last_gradient_op_;    // [c]: the index of the chunk's last B or B_weight
  std::vector<Request> pending_;                 // sums over the replicas in flight
  std::vector<ParameterRef<T>> summed_;          // ... and their parameters, divided by dp at the end
};

template <class F>
double Gpt<F>::train_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                            std::uint64_t step) {
  SpillCall<T> call(spilling());
  Step run(*this, tokens, targets, batch, step);
  const double loss = run.run(times_);
  call.done();
  const auto numel = [](const DistMatrix<T>& x) { return static_cast<std::size_t>(x.local().numel()); };
  const int stage = grid_.stage(), last = schedule_.virtual_stages() - 1;
  // wte's gradient: the embedding's part E (on u = 0's stage) plus the head's H (on u = U-1's), formed as E + H with
  // the same operation on both stages.
  const int first_stage = schedule_.stage_of(0), last_stage = schedule_.stage_of(last);
  if (stage == first_stage || stage == last_stage) {
    DistMatrix<T>& wte_grad = embedding_->wte_grad();
    if (first_stage == last_stage) {
      ops::axpby<T>(T(1), std::as_const(*head_wte_grad_).local(), T(1), wte_grad.local(), grid_.queue());
    } else if (stage == first_stage) {
      DistMatrix<T> head_part(grid_, wte_grad.rows(), wte_grad.cols(), MemoryKind::workspace);
      const Route out = route(first_stage, last_stage), in = route(last_stage, first_stage);
      Request sent_e = out.comm->isend(wte_grad.local().data(), numel(wte_grad), dtype_of<T>, out.to_rank,
                                       wte_tag(schedule_));
      sent_e.test();
      in.comm->recv(head_part.local().data(), numel(head_part), dtype_of<T>, in.from_rank, wte_tag(schedule_));
      sent_e.wait();
      ops::axpby<T>(T(1), std::as_const(head_part).local(), T(1), wte_grad.local(), grid_.queue());
    } else {
      const Route out = route(last_stage, first_stage), in = route(first_stage, last_stage);
      Request sent_h = out.comm->isend(head_wte_grad_->local().data(), numel(*head_wte_grad_), dtype_of<T>,
                                       out.to_rank, wte_tag(schedule_));
      sent_h.test();
      in.comm->recv(wte_grad.local().data(), numel(wte_grad), dtype_of<T>, in.from_rank, wte_tag(schedule_));
      sent_h.wait();
      ops::axpby<T>(T(1), std::as_const(*head_wte_grad_).local(), T(1), wte_grad.local(), grid_.queue());
    }
    if (head_wte_grad_) ops::fill<T>(head_wte_grad_->local(), T(0), grid_.queue());
  }
  run.finish_replica_sums();
  const double total = grid_.pipe().all_reduce(loss, ReduceOp::sum);  // only u = U-1's stage has a part
  return grid_.dp_comm().all_reduce(total, ReduceOp::sum) / grid_.dp();
}

template <class F>
auto Gpt<F>::forward_to_head(const std::vector<int>& tokens, std::int64_t batch) -> std::optional<DistMatrix<T>> {
  const auto n = static_cast<std::int64_t>(tokens.size());
  OPTIMUS_CHECK(batch >= 1 && n % batch == 0 && batch % grid_.q() == 0, F::name, ": ", n, " tokens as ", batch,
                " sequences: the sequences must be whole and their number divisible by q = ", grid_.q());
  const Pass pass = Pass::inference();
  const int stage = grid_.stage(), last = schedule_.virtual_stages() - 1;
  const auto count = [](const DistMatrix<T>& x) { return static_cast<std::size_t>(x.local().numel()); };
  std::optional<DistMatrix<T>> x;
  // Virtual stages in order: each stage waits only on a lower u, so the blocking sends and receives cannot deadlock.
  for (int u = 0; u <= last; ++u) {
    if (schedule_.stage_of(u) != stage) continue;
    if (u == 0) {
      EmbeddingContext none;
      x = embedding_->forward(tokens, batch, pass, none);
      detail::check_finite(*x, "embedding forward output");
    } else if (schedule_.stage_of(u - 1) != stage) {
      x.emplace(grid_, n, config_.hidden, MemoryKind::workspace);
      const Route in = route(schedule_.stage_of(u - 1), stage);
      in.comm->recv(x->local().data(), count(*x), dtype_of<T>, in.from_rank, tag_of(schedule_, u, 0, false));
    }
    Chunk& chunk = chunks_[static_cast<std::size_t>(schedule_.chunk_of(u))];
    each_block<T>(chunk.spill.get(), chunk.blocks.size(), false, nullptr, [&](std::size_t b) {
      BlockContext<T> none;
      x = chunk.blocks[b]->forward(*x, n / batch, pass, none);
    });
    if (u == last) {
      LayerNormContext<T> none;
      DistMatrix<T> y = ln_f_->forward(*x, pass, none);
      detail::check_finite(y, "ln_f forward output");
      return y;
    }
    if (schedule_.stage_of(u + 1) != stage) {
      const Route out = route(stage, schedule_.stage_of(u + 1));
      out.comm->send(x->local().data(), count(*x), dtype_of<T>, out.to_rank, tag_of(schedule_, u + 1, 0, false));
      x.reset();
    }
  }
  return std::nullopt;
}

template <class F>
double Gpt<F>::evaluate(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch) {
  OPTIMUS_CHECK(targets.size() == tokens.size(), F::name, "::evaluate: ", tokens.size(), " tokens but ",
                targets.size(), " targets");
  double loss = 0;
  SpillCall<T> call(spilling());
  const std::optional<DistMatrix<T>> y = forward_to_head(tokens, batch);
  call.done();
  if (y) {
    LmHeadContext<T> none;
    loss = F::head_forward(*head_, *embedding_, *y, targets, static_cast<std::int64_t>(tokens.size()),
                           Pass::inference(), none);
  }
  const double total = grid_.pipe().all_reduce(loss, ReduceOp::sum);  // only the head's stage has it
  return grid_.dp_comm().all_reduce(total, ReduceOp::sum) / grid_.dp();
}

template <class F>
auto Gpt<F>::logits(const std::vector<int>& tokens, std::int64_t batch) -> std::optional<DistMatrix<T>> {
  SpillCall<T> call(spilling());
  const std::optional<DistMatrix<T>> y = forward_to_head(tokens, batch);
  call.done();
  if (!y) return std::nullopt;
  return F::head_logits(*head_, *embedding_, *y);
}

template class Gpt<TwoD<float>>;
template class Gpt<TwoD<double>>;
template class Gpt<OneD<float>>;
template class Gpt<OneD<double>>;

}  // namespace optimus::pipeline

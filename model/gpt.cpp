// Gpt<Family> (model/gpt.hpp): a stage's chunks of the GPT — construction, parameters, one chunk's forward and
// backward, the one-stage forward and backward, and inference through the stages. gpt_step.cpp runs a training step's
// schedule.
#include "optimus/model/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "gpt_parts.hpp"
#include "message_tags.hpp"
#include "optimus/core/element_math.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/layers/finite_check.hpp"

namespace optimus {
namespace {

template <class F>
const pipeline::Schedule& checked(const pipeline::Schedule& s, const typename F::Place& place, const GptConfig& config) {
  const Grid& grid = F::grid(place);
  OPTIMUS_CHECK(grid.pp() == s.stages, F::name, ": the grid has ", grid.pp(),
                " stages (Grid::create(world, q, pp)) but the schedule ", name_of(s.kind), " has ", s.stages);
  validate(s);
  F::validate(config, place);
  pipeline::check_layers(config.layers, s.stages, s.chunks);
  pipeline::check_message_tags(F::name, s);
  return s;
}

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

// A block's finished gradients summed over the replicas (Gpt::ReplicaSums): a spilled block's now, while it is resident
// (averaged before they go home), the others' posted.
template <class T, class Sums, class Block>
void sum_block(Sums& sums, Block& block, bool spilled) {
  std::vector<ParameterRef<T>> params;
  block.parameters(params);
  if (spilled) {
    sums.average_now(params);
  } else {
    sums.post(params);
  }
}

}  // namespace

template <class F>
Gpt<F>::Gpt(const Place& place, const GptConfig& config) : Gpt(place, config, pipeline::one_stage(1), Spill::none) {}

template <class F>
Gpt<F>::Gpt(const Place& place, const GptConfig& config, Schedule schedule) : Gpt(place, config, schedule, Spill::none) {}

template <class F>
Gpt<F>::Gpt(const Place& place, const GptConfig& config, Schedule schedule, Spill spill)
    : place_(place), grid_(F::grid(place)), config_(config), schedule_(checked<F>(schedule, place, config)) {
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
  if (schedule_.stage_of(0) == stage || has_head) {
    embedding_ = std::make_unique<typename F::Embedding>(place_, config_,
                                                         has_head ? TiedHead::here : TiedHead::elsewhere);
  }
  if (has_head) {
    if (config_.block.head_transform) {
      transform_ = std::make_unique<HeadTransform<T>>(grid_, "head", config_.hidden, config_.block.mlp);
    }
    ln_f_ = std::make_unique<LayerNorm2D<T>>(grid_, ParameterTags::of(grid_), "ln_f", config_.hidden,
                                             config_.block.norm);
    head_ = std::make_unique<typename F::Head>(place_, config_);
    if (config_.block.tied_head) {  // the head's part of wte's gradient (an untied head's goes to lm_head's)
      head_wte_grad_ =
          std::make_unique<DistMatrix<T>>(grid_, embedding_->wte().rows(), config_.hidden, MemoryKind::gradients);
    }
  }
  for (const ParameterRef<T>& p : parameters()) init_parameter(p, config_, grid_.device());
  if (!grid_.pipe().matches_tags()) {
    // Every lane between stages (each boundary between virtual stages on different stages, both ways; the end stages'
    // wte exchange), in one order on every rank: each split is collective over the pipe.
    std::set<std::tuple<int, int, int>> lanes;
    for (int u = 1; u <= last; ++u) {
      const int a = schedule_.stage_of(u - 1), b = schedule_.stage_of(u);
      if (a != b) lanes.insert({{a, b, lane_of(u, false)}, {b, a, lane_of(u - 1, true)}});
    }
    const int first_stage = schedule_.stage_of(0), last_stage = schedule_.stage_of(last);
    if (first_stage != last_stage) {
      lanes.insert({{first_stage, last_stage, kWteLane}, {last_stage, first_stage, kWteLane}});
    }
    for (const auto& [from, to, lane] : lanes) {
      const bool member = stage == from || stage == to;
      std::unique_ptr<Communicator> c = grid_.pipe().split(member ? 0 : 1 + stage, stage == from ? 0 : 1);
      if (member) channels_.emplace(std::tuple{from, to, lane}, std::move(c));
    }
    if (schedule_.stages > 1) sums_channel_ = grid_.pipe().split(0, stage);
  }
}

template <class F>
auto Gpt<F>::route(int from, int to, int lane) const -> Route {
  if (channels_.empty()) return {.comm = &grid_.pipe(), .from_rank = from, .to_rank = to};
  return {.comm = channels_.at({from, to, lane}).get(), .from_rank = 0, .to_rank = 1};
}

template <class F>
void Gpt<F>::set_execution(const pipeline::Execution& execution) {
  OPTIMUS_CHECK(execution.jitter >= 0 && std::isfinite(execution.jitter), F::name, "::set_execution: jitter ",
                execution.jitter, " is not a fraction >= 0");
  Communicator& stage = F::holders(place_);
  if (execution.order == pipeline::Order::dynamic && stage.size() > 1 && !decisions_) {
    decisions_ = stage.split(0, stage.rank());
  }
  execution_ = execution;
}

template <class F>
Gpt<F>::~Gpt() = default;

template <class F>
void Gpt<F>::embedding_parameters(std::vector<ParameterRef<T>>& out) {
  if (!embedding_) return;
  std::vector<ParameterRef<T>> both;
  embedding_->parameters(both);
  const bool first = schedule_.stage_of(0) == grid_.stage();
  const std::string head = config_.block.tied_head ? "wte" : "lm_head.weight";
  for (ParameterRef<T>& p : both) {
    if (first || p.name == head) out.push_back(std::move(p));  // the head's stage holds the head's weight only
  }
}

template <class F>
void Gpt<F>::ln_f_parameters(std::vector<ParameterRef<T>>& out) {
  if (!ln_f_) return;
  const std::size_t from = out.size();
  if (transform_) transform_->parameters(out);
  ln_f_->parameters(out);
  F::mark_replicated(out, from, place_);  // (1D: the one-rank grid's, whole on every rank of the group)
  head_->parameters(out);                 // split over the vocabulary as the logits are
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
  // The whole model's order: wte, wpe (learned positions), block 0's tensors, ..., block L-1's, ln_f's, lm_head (untied).
  const bool first = schedule_.stage_of(0) == grid_.stage();
  std::vector<ParameterRef<T>> block;
  chunks_.front().blocks.front()->parameters(block);
  const auto per_block = static_cast<int>(block.size());
  NormOrder order{.slot = {}, .slots = 0, .across = &grid_.pipe()};
  std::vector<ParameterRef<T>> ln;  // the head's stage's: the transform's, ln_f's, the head's bias
  ln_f_parameters(ln);
  // wte 0 and wpe 1 (a slot of its own even where rotary positions leave it out), then BERT's tte and ln_e's where the
  // model has them, then the blocks'; after ln_f's, lm_head (untied), in the slot the model's last stage gives it.
  const int types = config_.block.token_types > 0 ? 1 : 0;
  const int blocks_from =
      2 + types + (config_.block.embedding_norm ? static_cast<int>(config_.block.norm.parameters(1)) : 0);
  const int head_slot = blocks_from + static_cast<int>(config_.layers) * per_block +
                        static_cast<int>(config_.block.norm.parameters(1)) + (config_.block.head_transform ? 3 : 0);
  std::vector<ParameterRef<T>> edges;
  embedding_parameters(edges);
  for (const ParameterRef<T>& p : edges) {
    if (p.name == "wte") order.slot.push_back(first ? 0 : -1);  // counted where the embedding is
    if (p.name == "wpe") order.slot.push_back(1);
    if (p.name == "tte") order.slot.push_back(2);
    if (p.name == "ln_e.weight") order.slot.push_back(2 + types);
    if (p.name == "ln_e.bias") order.slot.push_back(3 + types);
    if (p.name == "lm_head.weight") order.slot.push_back(head_slot);
  }
  for (const Chunk& chunk : chunks_) {
    for (int b = 0; b < per_block * static_cast<int>(chunk.range.count); ++b) {
      order.slot.push_back(blocks_from + static_cast<int>(chunk.range.first) * per_block + b);
    }
  }
  for (std::size_t k = 0; k < ln.size(); ++k) {
    order.slot.push_back(blocks_from + static_cast<int>(config_.layers) * per_block + static_cast<int>(k));
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
void Gpt<F>::load_global(const std::map<std::string, GlobalMatrix>& tensors) {
  const std::vector<ParameterRef<T>> mine = parameters();
  // The whole model's names: wte, wpe (learned positions), ln_f's, lm_head (untied), and h.<l>.<what a block names> for
  // every layer l.
  std::set<std::string> block_names;
  std::vector<ParameterRef<T>> first;
  chunks_.front().blocks.front()->parameters(first);
  const std::string prefix = "h." + std::to_string(chunks_.front().range.first) + ".";
  for (const ParameterRef<T>& p : first) block_names.insert(p.name.substr(prefix.size()));
  const auto in_model = [&](const std::string& name) {
    const BlockConfig& b = config_.block;
    if (name == "wte" || name == "ln_f.weight") return true;
    if (name == "wpe") return !b.rope;                  // learned positions only
    if (name == "ln_f.bias") return b.norm.centered();  // LayerNorm's beta
    if (name == "lm_head.weight") return !b.tied_head;  // the untied head's
    if (name == "tte") return b.token_types > 0;        // BERT's token types
    if (name == "ln_e.weight") return b.embedding_norm;
    if (name == "ln_e.bias") return b.embedding_norm && b.norm.centered();
    if (name == "head.dense.weight" || name == "head.dense.bias" || name == "head.bias") return b.head_transform;
    const std::size_t dot = name.find('.', 2);
    if (!name.starts_with("h.") || dot == std::string::npos) return false;
    const std::string layer = name.substr(2, dot - 2);
    return !layer.empty() && std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
           layer.size() < 10 && std::stoll(layer) < config_.layers && block_names.count(name.substr(dot + 1)) == 1;
  };
  std::map<std::string, GlobalMatrix> here;
  for (const auto& entry : tensors) {
    const std::string& name = entry.first;  // (a named string, not a structured binding: lambdas capture it everywhere)
    const bool held = std::any_of(mine.begin(), mine.end(), [&](const ParameterRef<T>& p) { return p.name == name; });
    OPTIMUS_CHECK(held || in_model(name), "load_global: unknown parameter '", name, "'");
    if (held) here.emplace(name, entry.second);
  }
  load_named(mine, here, grid_.device());
}

template <class F>
void Gpt<F>::zero_grad() {
  if (embedding_) embedding_->zero_grad();
  for (Chunk& chunk : chunks_) {
    for (auto& block : chunk.blocks) block->zero_grad();
    if (chunk.spill) chunk.spill->gradients_zeroed();
  }
  if (ln_f_) ln_f_->zero_grad();
  if (transform_) transform_->zero_grad();
  if (head_) head_->zero_grad();
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


template <class F>
double Gpt<F>::forward_chunk(Chunk& chunk, Context& saved, const Pass& pass, const std::vector<int>& tokens,
                             const std::vector<int>& token_types, const std::vector<int>& targets, std::int64_t batch,
                             std::int64_t mean_over, std::optional<DistMatrix<T>>& x) {
  const int u = chunk.virtual_stage, last = schedule_.virtual_stages() - 1;
  if (u == 0) {
    x = embedding_->forward(tokens, token_types, batch, pass, saved.embedding);
    detail::check_finite(*x, "embedding forward output");
  }
  const std::int64_t seq = static_cast<std::int64_t>(tokens.size()) / batch;
  saved.blocks.resize(chunk.blocks.size());
  each_block(chunk.spill.get(), chunk.blocks.size(), false, &saved.blocks,
             [&](std::size_t b) { x = chunk.blocks[b]->forward(*x, seq, pass, saved.blocks[b]); });
  if (u != last) return 0;
  if (transform_) x = transform_->forward(*x, pass, saved.transform);
  // ln_f's output written as the head keeps its input (bf16 under mixed precision), and taken over by it.
  SavedActivation<T> y = ln_f_->forward_saved(*x, pass, saved.ln_f);
  x.reset();
  detail::check_finite(y, "ln_f forward output");
  return head_->forward(std::move(y), embedding_->head_operand(), targets, mean_over, pass, saved.head);
}

template <class F>
auto Gpt<F>::backward_chunk(Chunk& chunk, Context& saved, SplitWeights* later, std::optional<DistMatrix<T>> dy,
                            ReplicaSums* sums) -> std::optional<DistMatrix<T>> {
  const int u = chunk.virtual_stage, last = schedule_.virtual_stages() - 1;
  if (u == last) {  // the loss's gradient through the head and ln_f
    // The head's weight as its products take it (perhaps its bf16 copy); its gradient: the head's part of wte's, or
    // lm_head's where untied.
    const SummaOperand<T> weight = embedding_->head_operand();
    DistMatrix<T>& dweight = head_wte_grad_ ? *head_wte_grad_ : embedding_->lm_head_grad();
    const DistMatrix<T> dx = later == nullptr ? head_->backward(std::move(saved.head), weight, dweight)
                                              : head_->backward(std::move(saved.head), weight, dweight, later->edges);
    detail::check_finite(dx, "lm_head backward input gradient");
    dy = later == nullptr ? ln_f_->backward(std::move(saved.ln_f), dx)
                          : ln_f_->backward(std::move(saved.ln_f), dx, later->edges);
    detail::check_finite(*dy, "ln_f backward input gradient");
    if (transform_) {
      dy = later == nullptr ? transform_->backward(std::move(saved.transform), *dy)
                            : transform_->backward(std::move(saved.transform), *dy, later->edges);
    }
  }
  if (later) later->blocks.resize(chunk.blocks.size());
  BlockSpill<T>* spill = chunk.spill.get();
  each_block(spill, chunk.blocks.size(), true, &saved.blocks, [&](std::size_t b) {
    dy = later ? chunk.blocks[b]->backward(std::move(saved.blocks[b]), *dy, later->blocks[b])
               : chunk.blocks[b]->backward(std::move(saved.blocks[b]), *dy);
    if (sums != nullptr && !later) sum_block<T>(*sums, *chunk.blocks[b], spill != nullptr);  // (split: B_weight's)
  });
  if (u != 0 || later) return dy;
  embedding_->backward(std::move(saved.embedding), *dy);
  return std::nullopt;
}

template <class F>
void Gpt<F>::weight_chunk(Chunk& chunk, SplitWeights& weights, ReplicaSums* sums) {
  weights.edges.run();  // the head's and ln_f's, queued first
  BlockSpill<T>* spill = chunk.spill.get();
  each_block<T>(spill, chunk.blocks.size(), true, nullptr, [&](std::size_t b) {
    weights.blocks[b].run();
    if (sums != nullptr) sum_block<T>(*sums, *chunk.blocks[b], spill != nullptr);
  });
}

template <class F>
void Gpt<F>::add_head_wte_grad() {
  if (!head_wte_grad_) return;  // an untied head: nothing of wte's
  ops::axpby<T>(T(1), std::as_const(*head_wte_grad_).local(), T(1), embedding_->wte_grad().local(), grid_.queue());
  ops::fill<T>(head_wte_grad_->local(), T(0), grid_.queue());
}

template <class F>
double Gpt<F>::mean_over_model(double part, const Mean& mean) const {
  const double total = schedule_.stages == 1 ? part : grid_.pipe().all_reduce(part, ReduceOp::sum);
  if (grid_.dp() == 1) return total;
  const double replicas = grid_.dp_comm().all_reduce(total, ReduceOp::sum);
  return mean.summed ? replicas : replicas / grid_.dp();
}

template <class F>
auto Gpt<F>::predicted_tokens(const std::vector<int>& targets, const char* call) const -> Mean {
  const auto n = static_cast<std::int64_t>(targets.size());
  const auto predicted =
      n - static_cast<std::int64_t>(std::count(targets.begin(), targets.end(), math::kIgnoredTarget));
  if (grid_.dp() == 1) {
    OPTIMUS_CHECK(predicted >= 1, F::name, "::", call, ": none of the ", n, " targets is predicted (each is ",
                  math::kIgnoredTarget, ")");
    return {.over = predicted, .summed = false};
  }
  // The whole batch's counts (exact in doubles), the same on every rank of every replica.
  std::vector<double> counts{static_cast<double>(n), static_cast<double>(predicted)};
  grid_.dp_comm().all_reduce(counts.data(), counts.data(), counts.size(), DType::f64, ReduceOp::sum);
  const auto all = static_cast<std::int64_t>(counts[0]), all_predicted = static_cast<std::int64_t>(counts[1]);
  OPTIMUS_CHECK(all_predicted >= 1, F::name, "::", call, ": none of the ", all, " targets of the ", grid_.dp(),
                " replicas' batch is predicted (each is ", math::kIgnoredTarget, ")");
  if (all_predicted == all) return {.over = n, .summed = false};  // every position: the replicas' means averaged
  return {.over = all_predicted, .summed = true};
}

template <class F>
void Gpt<F>::check_whole(const char* call) const {
  OPTIMUS_CHECK(schedule_.virtual_stages() == 1, F::name, "::", call, ": the model is cut into ",
                schedule_.virtual_stages(), " virtual stages; forward and backward take a model of one stage apart "
                "(train_step runs a pipeline)");
}

template <class F>
double Gpt<F>::forward(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                       std::uint64_t step, Context& saved) {
  return forward(tokens, targets, EncoderInputs{}, batch, step, saved);
}

template <class F>
double Gpt<F>::forward(const std::vector<int>& tokens, const std::vector<int>& targets, const EncoderInputs& inputs,
                       std::int64_t batch, std::uint64_t step, Context& saved) {
  check_whole("forward");
  const auto n = static_cast<std::int64_t>(tokens.size());
  OPTIMUS_CHECK(batch >= 1 && n % batch == 0 && static_cast<std::int64_t>(targets.size()) == n, F::name,
                "::forward: ", n, " tokens and ", targets.size(), " targets are not ", batch, " whole sequences");
  check_inputs(inputs, batch, n / batch, "forward");
  detail::SpillCall<T> call(spilling());
  Pass pass = Pass::train(step, grid_.dp_index() * batch);
  pass.lengths = inputs.lengths;
  saved = Context{};
  std::optional<DistMatrix<T>> x;
  const Mean mean = predicted_tokens(targets, "forward");
  const double loss =
      forward_chunk(chunks_.front(), saved, pass, tokens, inputs.token_types, targets, batch, mean.over, x);
  saved.mark = ContextMark(grid_);
  saved.summed_over_replicas = mean.summed;
  call.done();
  return mean_over_model(loss, mean);
}

template <class F>
void Gpt<F>::backward(Context saved) {
  check_whole("backward");
  saved.mark.check(grid_, "gpt");
  detail::SpillCall<T> call(spilling());
  const bool replicas = grid_.dp() > 1;
  ReplicaSums sums(grid_, Mean{.over = 0, .summed = saved.summed_over_replicas});
  backward_chunk(chunks_.front(), saved, nullptr, std::nullopt, replicas ? &sums : nullptr);
  add_head_wte_grad();
  if (replicas) {
    std::vector<ParameterRef<T>> edges;
    embedding_parameters(edges);
    ln_f_parameters(edges);
    sums.finish(edges);
  }
  call.done();
}

template <class F>
void Gpt<F>::check_inputs(const EncoderInputs& inputs, std::int64_t batch, std::int64_t seq, const char* call) const {
  const std::string who = std::string(F::name) + "::" + call;
  check_token_types(inputs.token_types, static_cast<std::size_t>(batch * seq), config_.block.token_types, who);
  check_lengths(inputs.lengths, batch, seq, who);
}

template <class F>
auto Gpt<F>::forward_to_head(const std::vector<int>& tokens, const EncoderInputs& inputs, std::int64_t batch,
                             const char* call) -> std::optional<DistMatrix<T>> {
  const auto n = static_cast<std::int64_t>(tokens.size());
  OPTIMUS_CHECK(batch >= 1 && n % batch == 0 && batch % grid_.q() == 0, F::name, ": ", n, " tokens as ", batch,
                " sequences: the sequences must be whole and their number divisible by q = ", grid_.q());
  check_inputs(inputs, batch, n / batch, call);
  Pass pass = Pass::inference();
  pass.lengths = inputs.lengths;
  const int stage = grid_.stage(), last = schedule_.virtual_stages() - 1;
  const auto count = [](const DistMatrix<T>& x) { return static_cast<std::size_t>(x.local().numel()); };
  std::optional<DistMatrix<T>> x;
  // Virtual stages in order: each stage waits only on a lower u, so the blocking sends and receives cannot deadlock.
  for (int u = 0; u <= last; ++u) {
    if (schedule_.stage_of(u) != stage) continue;
    if (u == 0) {
      EmbeddingContext<T> none;
      x = embedding_->forward(tokens, inputs.token_types, batch, pass, none);
      detail::check_finite(*x, "embedding forward output");
    } else if (schedule_.stage_of(u - 1) != stage) {
      x.emplace(grid_, n, config_.hidden, MemoryKind::workspace);
      const Route in = route(schedule_.stage_of(u - 1), stage, lane_of(u, false));
      in.comm->recv(x->local().data(), count(*x), dtype_of<T>, in.from_rank, pipeline::tag_of(schedule_, u, 0, false));
    }
    Chunk& chunk = chunks_[static_cast<std::size_t>(schedule_.chunk_of(u))];
    each_block<T>(chunk.spill.get(), chunk.blocks.size(), false, nullptr, [&](std::size_t b) {
      BlockContext<T> none;
      x = chunk.blocks[b]->forward(*x, n / batch, pass, none);
    });
    if (u == last) {
      LayerNormContext<T> none;
      if (transform_) {
        MlpContext<T> unsaved;
        x = transform_->forward(*x, pass, unsaved);
      }
      DistMatrix<T> y = ln_f_->forward(*x, pass, none);
      detail::check_finite(y, "ln_f forward output");
      return y;
    }
    if (schedule_.stage_of(u + 1) != stage) {
      const Route out = route(stage, schedule_.stage_of(u + 1), lane_of(u + 1, false));
      out.comm->send(x->local().data(), count(*x), dtype_of<T>, out.to_rank, pipeline::tag_of(schedule_, u + 1, 0, false));
      x.reset();
    }
  }
  return std::nullopt;
}

template <class F>
double Gpt<F>::evaluate(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch) {
  return evaluate(tokens, targets, EncoderInputs{}, batch);
}

template <class F>
double Gpt<F>::evaluate(const std::vector<int>& tokens, const std::vector<int>& targets, const EncoderInputs& inputs,
                        std::int64_t batch) {
  OPTIMUS_CHECK(targets.size() == tokens.size(), F::name, "::evaluate: ", tokens.size(), " tokens but ",
                targets.size(), " targets");
  const Mean mean = predicted_tokens(targets, "evaluate");  // checked on every rank, head or not
  double loss = 0;
  detail::SpillCall<T> call(spilling());
  const std::optional<DistMatrix<T>> y = forward_to_head(tokens, inputs, batch, "evaluate");
  call.done();
  if (y) {
    LmHeadContext<T> none;
    loss = head_->forward(*y, embedding_->head_operand(), targets, mean.over, Pass::inference(), none);
  }
  return mean_over_model(loss, mean);  // only the head's stage has a part
}

template <class F>
auto Gpt<F>::logits(const std::vector<int>& tokens, std::int64_t batch) -> std::optional<DistMatrix<T>> {
  return logits(tokens, EncoderInputs{}, batch);
}

template <class F>
auto Gpt<F>::logits(const std::vector<int>& tokens, const EncoderInputs& inputs, std::int64_t batch)
    -> std::optional<DistMatrix<T>> {
  detail::SpillCall<T> call(spilling());
  const std::optional<DistMatrix<T>> y = forward_to_head(tokens, inputs, batch, "logits");
  call.done();
  if (!y) return std::nullopt;
  return head_->logits(*y, embedding_->head_operand());
}


template class Gpt<TwoD<float>>;
template class Gpt<TwoD<double>>;
template class Gpt<OneD<float>>;
template class Gpt<OneD<double>>;

}  // namespace optimus

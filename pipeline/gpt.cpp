// pipeline::Gpt2D (gpt.hpp): a stage's chunks of the GPT, run through the schedule's operations, with the blocks
// passed between stages over the pipeline communicator.
#include "optimus/pipeline/gpt.hpp"

#include <map>
#include <tuple>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus::pipeline {

template <class T>
struct Gpt2D<T>::Chunk {
  int virtual_stage = 0;
  LayerRange range;
  std::vector<std::unique_ptr<TransformerBlock2D<T>>> blocks;
};

// What one micro-batch's forward on one chunk keeps for its backward.
template <class T>
struct Gpt2D<T>::Saved {
  EmbeddingContext embedding;             // u = 0
  std::vector<BlockContext<T>> blocks;    // the chunk's blocks
  LayerNormContext<T> ln_f;               // u = U-1
  LmHeadContext<T> head;                  // u = U-1
};

namespace {

// One tag per message of a step: the receiving virtual stage u, the micro-batch k and the direction; after them, the
// end of step's exchange of wte's gradient parts.
int tag_of(const Schedule& s, int u, int k, bool gradient) { return (u * s.micro_batches + k) * 2 + (gradient ? 1 : 0); }
int wte_tag(const Schedule& s) { return 2 * s.virtual_stages() * s.micro_batches; }
constexpr int kMaxTag = 32767;  // the least upper bound MPI promises

const Schedule& checked(const Schedule& s, const Grid& grid, const GptConfig& config) {
  OPTIMUS_CHECK(grid.pp() == s.stages, "pipeline::Gpt2D: the grid has ", grid.pp(),
                " stages (Grid::create(world, q, pp)) but the schedule ", name_of(s.kind), " has ", s.stages);
  OPTIMUS_CHECK(!s.split_backward, "pipeline::Gpt2D: schedule ", name_of(s.kind),
                " splits the backward (B_input, B_weight), which the layers cannot do yet");
  OPTIMUS_CHECK(grid.device() == nullptr, "pipeline::Gpt2D: grids on a device are not supported yet");
  validate(s);
  validate_for_grid(config, grid.q());
  check_layers(config.layers, s.stages, s.chunks);
  OPTIMUS_CHECK(wte_tag(s) <= kMaxTag, "pipeline::Gpt2D: ", s.micro_batches, " micro-batches on ", s.virtual_stages(),
                " virtual stages need more message tags than MPI promises (", kMaxTag, ")");
  return s;
}

}  // namespace

template <class T>
Gpt2D<T>::Gpt2D(const Grid& grid, const GptConfig& config, Schedule schedule)
    : grid_(grid), config_(config), schedule_(checked(schedule, grid, config)) {
  const int stage = grid_.stage(), last = schedule_.virtual_stages() - 1;
  for (int c = 0; c < schedule_.chunks; ++c) {
    Chunk chunk;
    chunk.virtual_stage = schedule_.virtual_stage(stage, c);
    chunk.range = layers_of(schedule_, config_.layers, chunk.virtual_stage);
    for (std::int64_t l = chunk.range.first; l < chunk.range.first + chunk.range.count; ++l) {
      chunk.blocks.push_back(std::make_unique<TransformerBlock2D<T>>(grid_, config_, l));
    }
    chunks_.push_back(std::move(chunk));
  }
  const bool has_head = schedule_.stage_of(last) == stage;
  if (schedule_.stage_of(0) == stage || has_head) embedding_ = std::make_unique<Embedding2D<T>>(grid_, config_);
  if (has_head) {
    ln_f_ = std::make_unique<LayerNorm2D<T>>(grid_, "ln_f", config_.hidden);
    head_ = std::make_unique<LmHead2D<T>>(grid_, config_.vocab);
    head_wte_grad_ =
        std::make_unique<DistMatrix<T>>(grid_, embedding_->wte().rows(), config_.hidden, MemoryKind::gradients);
  }
  for (const ParameterRef<T>& p : parameters()) init_parameter(p, config_, grid_.device());
}

template <class T>
Gpt2D<T>::~Gpt2D() = default;

template <class T>
std::vector<ParameterRef<T>> Gpt2D<T>::parameters() {
  std::vector<ParameterRef<T>> out;
  if (embedding_) {
    std::vector<ParameterRef<T>> both;
    embedding_->parameters(both);
    const bool first = schedule_.stage_of(0) == grid_.stage();
    for (ParameterRef<T>& p : both) {
      if (first || p.name == "wte") out.push_back(std::move(p));  // the head's stage holds wte only
    }
  }
  for (Chunk& chunk : chunks_) {
    for (auto& block : chunk.blocks) block->parameters(out);
  }
  if (ln_f_) ln_f_->parameters(out);
  return out;
}

template <class T>
std::map<std::string, GlobalMatrix> Gpt2D<T>::gather(bool gradients) {
  return gather_named(grid_.grid(), parameters(), gradients, grid_.device());
}

template <class T>
void Gpt2D<T>::zero_grad() {
  if (embedding_) embedding_->zero_grad();
  for (Chunk& chunk : chunks_) {
    for (auto& block : chunk.blocks) block->zero_grad();
  }
  if (ln_f_) ln_f_->zero_grad();
  if (head_wte_grad_) ops::fill<T>(head_wte_grad_->local(), T(0), grid_.queue());
}

template <class T>
double Gpt2D<T>::train_step(const std::vector<int>& tokens, const std::vector<int>& targets, std::int64_t batch,
                            std::uint64_t step) {
  const int m = schedule_.micro_batches, stage = grid_.stage(), last = schedule_.virtual_stages() - 1;
  const auto n = static_cast<std::int64_t>(tokens.size());
  OPTIMUS_CHECK(batch >= 1 && batch % m == 0 && n % batch == 0 && static_cast<std::int64_t>(targets.size()) == n,
                "pipeline::Gpt2D::train_step: ", n, " tokens and ", targets.size(), " targets as ", batch,
                " sequences in ", m, " micro-batches: the micro-batches must divide the batch into whole sequences");
  const std::int64_t micro = batch / m, seq = n / batch, rows = micro * seq;
  OPTIMUS_CHECK(micro % grid_.q() == 0, "pipeline::Gpt2D::train_step: a micro-batch of ", micro,
                " sequences is not divisible by q = ", grid_.q());
  const auto slice = [&](const std::vector<int>& ids, int k) {
    return std::vector<int>(ids.begin() + k * rows, ids.begin() + (k + 1) * rows);
  };

  std::map<std::pair<int, int>, Saved> saved;                   // (k, c)
  std::map<std::tuple<int, int, bool>, DistMatrix<T>> handed;   // (u, k, gradient): blocks kept on this stage
  std::vector<Request> sends;
  std::vector<DistMatrix<T>> sent;  // the blocks being sent, alive until their sends complete
  const auto numel = [](const DistMatrix<T>& x) { return static_cast<std::size_t>(x.local().numel()); };
  // Hands block x to virtual stage u (its activation or its gradient): kept if u is on this stage, else sent.
  const auto deliver = [&](DistMatrix<T> x, int u, int k, bool gradient) {
    const int to = schedule_.stage_of(u);
    if (to == stage) {
      handed.emplace(std::make_tuple(u, k, gradient), std::move(x));
      return;
    }
    sends.push_back(grid_.pipe().isend(x.local().data(), numel(x), dtype_of<T>, to, tag_of(schedule_, u, k, gradient)));
    sent.push_back(std::move(x));
  };
  // The block virtual stage u needs: its input activation (from u-1) or its output's gradient (from u+1).
  const auto receive = [&](int u, int k, bool gradient) {
    const int from = schedule_.stage_of(gradient ? u + 1 : u - 1);
    if (from == stage) {
      auto it = handed.find(std::make_tuple(u, k, gradient));
      OPTIMUS_CHECK(it != handed.end(), "pipeline::Gpt2D: virtual stage ", u, " has no ",
                    gradient ? "gradient" : "activation", " of micro-batch ", k, " from its neighbour");
      DistMatrix<T> x = std::move(it->second);
      handed.erase(it);
      return x;
    }
    DistMatrix<T> x(grid_, rows, config_.hidden, MemoryKind::workspace);
    grid_.pipe().recv(x.local().data(), numel(x), dtype_of<T>, from, tag_of(schedule_, u, k, gradient));
    return x;
  };

  double loss = 0;  // this stage's part of the batch's mean (u = U-1's stage: all of it)
  for (const Op& op : schedule_.ops[static_cast<std::size_t>(stage)]) {
    const int k = op.micro_batch;
    Chunk& chunk = chunks_[static_cast<std::size_t>(op.chunk)];
    const int u = chunk.virtual_stage;
    Saved& s = saved[{k, op.chunk}];
    const Pass pass{.step = step, .training = true, .first_sequence = grid_.dp_index() * batch + k * micro};
    if (op.work == Work::forward) {
      DistMatrix<T> x = u == 0 ? embedding_->forward(slice(tokens, k), micro, pass, s.embedding) : receive(u, k, false);
      s.blocks.resize(chunk.blocks.size());
      for (std::size_t b = 0; b < chunk.blocks.size(); ++b) x = chunk.blocks[b]->forward(x, seq, pass, s.blocks[b]);
      if (u == last) {
        const DistMatrix<T> y = ln_f_->forward(x, pass, s.ln_f);
        loss += head_->forward(y, embedding_->wte(), slice(targets, k), n, pass, s.head);
      } else {
        deliver(std::move(x), u + 1, k, false);
      }
      continue;
    }
    DistMatrix<T> dy = u == last ? ln_f_->backward(std::move(s.ln_f), head_->backward(std::move(s.head),
                                                                                        embedding_->wte(),
                                                                                        *head_wte_grad_))
                                 : receive(u, k, true);
    for (std::size_t b = chunk.blocks.size(); b-- > 0;) dy = chunk.blocks[b]->backward(std::move(s.blocks[b]), dy);
    if (u == 0) {
      embedding_->backward(std::move(s.embedding), dy);
    } else {
      deliver(std::move(dy), u - 1, k, true);
    }
    saved.erase({k, op.chunk});
  }
  for (Request& r : sends) r.wait();
  OPTIMUS_CHECK(handed.empty() && saved.empty(), "pipeline::Gpt2D: stage ", stage, " ended its step with ",
                handed.size(), " blocks handed over and ", saved.size(), " contexts not consumed");

  // wte's gradient: the embedding's part E (on u = 0's stage) plus the head's H (on u = U-1's), formed as E + H with
  // the same operation on both stages.
  const int first_stage = schedule_.stage_of(0), last_stage = schedule_.stage_of(last);
  if (stage == first_stage || stage == last_stage) {
    DistMatrix<T>& wte_grad = embedding_->wte_grad();
    if (first_stage == last_stage) {
      ops::axpby<T>(T(1), std::as_const(*head_wte_grad_).local(), T(1), wte_grad.local(), grid_.queue());
    } else if (stage == first_stage) {
      DistMatrix<T> head_part(grid_, wte_grad.rows(), wte_grad.cols(), MemoryKind::workspace);
      Request sent_e = grid_.pipe().isend(wte_grad.local().data(), numel(wte_grad), dtype_of<T>, last_stage,
                                          wte_tag(schedule_));
      grid_.pipe().recv(head_part.local().data(), numel(head_part), dtype_of<T>, last_stage, wte_tag(schedule_));
      sent_e.wait();
      ops::axpby<T>(T(1), std::as_const(head_part).local(), T(1), wte_grad.local(), grid_.queue());
    } else {
      Request sent_h = grid_.pipe().isend(head_wte_grad_->local().data(), numel(*head_wte_grad_), dtype_of<T>,
                                          first_stage, wte_tag(schedule_));
      grid_.pipe().recv(wte_grad.local().data(), numel(wte_grad), dtype_of<T>, first_stage, wte_tag(schedule_));
      sent_h.wait();
      ops::axpby<T>(T(1), std::as_const(*head_wte_grad_).local(), T(1), wte_grad.local(), grid_.queue());
    }
    if (head_wte_grad_) ops::fill<T>(head_wte_grad_->local(), T(0), grid_.queue());
  }
  if (grid_.dp() > 1) {  // averaged over replicas, as Gpt2D does
    const T factor = T(1) / static_cast<T>(grid_.dp());
    for (const ParameterRef<T>& p : parameters()) {
      grid_.dp_comm().all_reduce(p.grad.data(), p.grad.data(), static_cast<std::size_t>(p.grad.numel()), dtype_of<T>,
                                 ReduceOp::sum);
      scale_gradient(p, factor, grid_.queue());
    }
  }
  const double total = grid_.pipe().all_reduce(loss, ReduceOp::sum);  // only u = U-1's stage has a part
  return grid_.dp_comm().all_reduce(total, ReduceOp::sum) / grid_.dp();
}

template class Gpt2D<float>;
template class Gpt2D<double>;

}  // namespace optimus::pipeline

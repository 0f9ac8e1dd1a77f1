// Internal to the GPT (model/gpt.hpp): what its two source files share — a stage's chunk, what a micro-batch keeps
// between its F and its backward, the sums over the replicas, a spilled call, and a pass over a chunk's blocks.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "optimus/core/error.hpp"
#include "optimus/model/gpt.hpp"

namespace optimus {

template <class F>
struct Gpt<F>::Chunk {
  int virtual_stage = 0;
  pipeline::LayerRange range;
  std::unique_ptr<BlockSpill<T>> spill;  // before the blocks: their home memory outlives them
  std::vector<std::unique_ptr<typename F::Block>> blocks;
};

// What one micro-batch's F on one chunk keeps for its backward.
template <class F>
struct Gpt<F>::Saved {
  Context context;                            // the embedding's (u = 0), the chunk's blocks', ln_f's and the head's (U-1)
  SplitWeights weights;                       // split backward: B_input's queued weight gradients
  std::optional<DistMatrix<T>> embedding_dy;  // split backward, u = 0: the embedding's output gradient
};

// The gradients summed over the replicas during a backward: posted as they are finished (waited at once with the grid's
// overlap off), then divided by dp at finish — unless the loss is a mean over the whole batch already (Mean::summed:
// a masked LM's), when the sums are the gradients.
template <class F>
class Gpt<F>::ReplicaSums {
 public:
  ReplicaSums(const Grid& grid, const Mean& mean) : grid_(grid), average_(!mean.summed) {}

  void post(const std::vector<ParameterRef<T>>& params) {
    for (const ParameterRef<T>& p : params) {
      pending_.push_back(sum(p));
      if (!grid_.overlap()) pending_.back().wait();
      summed_.push_back(p);
    }
  }
  // A spilled block's gradients while it is resident: summed and divided by dp now, before they go home.
  void average_now(const std::vector<ParameterRef<T>>& params) {
    std::vector<Request> now;
    for (const ParameterRef<T>& p : params) now.push_back(sum(p));
    for (Request& r : now) r.wait();
    if (!average_) return;
    for (const ParameterRef<T>& p : params) scale_gradient(p, factor(), grid_.queue());
  }
  // `rest` posted too, every sum waited, and every posted gradient divided by dp.
  void finish(const std::vector<ParameterRef<T>>& rest) {
    post(rest);
    for (Request& r : pending_) r.wait();
    if (!average_) return;
    for (const ParameterRef<T>& p : summed_) scale_gradient(p, factor(), grid_.queue());
  }

 private:
  Request sum(const ParameterRef<T>& p) {
    return grid_.dp_comm().iall_reduce(p.grad.data(), p.grad.data(), static_cast<std::size_t>(p.grad.numel()),
                                       dtype_of<T>, ReduceOp::sum);
  }
  T factor() const { return T(1) / static_cast<T>(grid_.dp()); }

  const Grid& grid_;
  bool average_;  // divide the sums by dp (false: Mean::summed)
  std::vector<Request> pending_;
  std::vector<ParameterRef<T>> summed_;
};

namespace detail {

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

}  // namespace detail
}  // namespace optimus

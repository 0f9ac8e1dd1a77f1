// optimus::WeightGradients: a layer's backward split in two, as zero-bubble pipelines run it (Qi et al., ICLR 2024).
//   B_input : the input gradient dx, which the previous pipeline stage waits for;
//   B_weight: the weight gradients (dW, db, dgamma, dbeta, the head's dwte), which nobody waits for.
// A layer's backward(saved, dy, later) computes dx now and queues its weight-gradient work in `later` with what that
// work reads (the saved input, the output gradient); later.run() does it, in the order queued. The arithmetic of
// every gradient is that of backward(saved, dy) — the same products on the same values — so split or not, the
// gradients are bitwise the same (pipeline tests assert it).
//
// Memory: queued work keeps what it reads alive until run() — a Linear's saved input (activations) and a copy of its
// output gradient (workspace; the 2D Linear's in bf16 under mixed precision, as its products take it), a LayerNorm's
// xhat and output gradient copy. Dropping queued work drops its gradients
// (as dropping a context does); run() it or discard() it deliberately.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace optimus {

class WeightGradients {
 public:
  WeightGradients() = default;
  WeightGradients(WeightGradients&&) noexcept = default;
  WeightGradients& operator=(WeightGradients&&) noexcept = default;
  WeightGradients(const WeightGradients&) = delete;
  WeightGradients& operator=(const WeightGradients&) = delete;

  // Queues work(state) with `state` (what the work reads) kept alive until it runs.
  template <class State, class Work>
  void defer(State state, Work work) {
    auto held = std::make_shared<State>(std::move(state));
    work_.push_back([held, work]() { work(*held); });
  }

  // Runs the queued work in the order queued, each item's state freed as soon as it has run; leaves this empty.
  void run();
  // Drops the queued work (its gradients are lost) and the state it holds.
  void discard() { work_.clear(); }
  std::size_t size() const { return work_.size(); }
  bool empty() const { return work_.empty(); }

 private:
  std::vector<std::function<void()>> work_;
};

}  // namespace optimus

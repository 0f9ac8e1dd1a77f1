// List scheduling for the wave and ZB-H1 (list_schedule.hpp): a discrete-time play of the pipeline with integer unit
// costs, where each free stage starts the operation its priorities pick.
#include "list_schedule.hpp"

#include <algorithm>
#include <deque>
#include <iterator>
#include <limits>
#include <optional>

#include "optimus/core/error.hpp"

namespace optimus::pipeline::detail {
namespace {

constexpr long kNever = std::numeric_limits<long>::max();

class Player {
 public:
  explicit Player(Schedule& s)
      : s_(s),
        u_count_(s.virtual_stages()),
        m_(s.micro_batches),
        f_done_(static_cast<std::size_t>(m_ * u_count_), kNever),
        b_done_(static_cast<std::size_t>(m_ * u_count_), kNever),
        next_f_(static_cast<std::size_t>(u_count_), 0),
        next_b_(static_cast<std::size_t>(u_count_), 0),
        live_(static_cast<std::size_t>(u_count_), 0),
        weights_(static_cast<std::size_t>(s.stages)),
        free_at_(static_cast<std::size_t>(s.stages), 0) {}

  void play() {
    s_.ops.assign(static_cast<std::size_t>(s_.stages), {});
    if (s_.kind == Kind::wave) {  // each virtual stage's own 1F1B order, on a pipeline of U virtual stages
      sequence_.resize(static_cast<std::size_t>(u_count_));
      for (int u = 0; u < u_count_; ++u) {
        std::deque<Work>& order = sequence_[static_cast<std::size_t>(u)];
        const int warmup = std::min(u_count_ - u - 1, m_);
        order.insert(order.end(), static_cast<std::size_t>(warmup), Work::forward);
        for (int i = 0; i < m_ - warmup; ++i) order.insert(order.end(), {Work::forward, Work::backward});
        order.insert(order.end(), static_cast<std::size_t>(warmup), Work::backward);
      }
    }
    const long per_stage = static_cast<long>(m_) * s_.chunks * (s_.split_backward ? 3 : 2);
    const long total = per_stage * s_.stages;
    long scheduled = 0;
    // Every operation costs at most 2, and some stage can always start one while operations remain: the play ends.
    const long horizon = 2 * total + 2;
    for (long t = 0; scheduled < total; ++t) {
      OPTIMUS_CHECK(t <= horizon, "pipeline: list scheduling of ", name_of(s_.kind), " made no progress by time ", t);
      for (int stage = 0; stage < s_.stages; ++stage) {
        if (free_at_[static_cast<std::size_t>(stage)] > t) continue;
        const std::optional<Op> op = pick(stage, t);
        if (!op) continue;
        start(stage, *op, t);
        ++scheduled;
      }
    }
  }

 private:
  std::size_t at(int k, int u) const { return static_cast<std::size_t>(k * u_count_ + u); }
  long cap(int u) const { return std::min(u_count_ - u, m_); }
  // Whether virtual stage u may run `work` next (the wave: only what its 1F1B order says).
  bool next_in_order(int u, Work work) const {
    return sequence_.empty() || sequence_[static_cast<std::size_t>(u)].front() == work;
  }

  std::optional<Op> pick(int stage, long t) const {
    const Work backward = s_.split_backward ? Work::backward_input : Work::backward;
    std::optional<Op> best;
    int best_u = -1;
    for (int c = 0; c < s_.chunks; ++c) {  // 1. a ready backward, deepest chunk first (the longest way left)
      const int u = s_.virtual_stage(stage, c), k = next_b_[static_cast<std::size_t>(u)];
      if (k >= m_ || !next_in_order(u, Work::backward) || f_done_[at(k, u)] > t) continue;
      if (u + 1 < u_count_ && b_done_[at(k, u + 1)] > t) continue;
      if (!best || u > best_u) {
        best = Op{.work = backward, .micro_batch = k, .chunk = c};
        best_u = u;
      }
    }
    if (best) return best;
    for (int c = 0; c < s_.chunks; ++c) {  // 2. a forward under the in-flight cap, lowest micro-batch first
      const int u = s_.virtual_stage(stage, c), k = next_f_[static_cast<std::size_t>(u)];
      if (k >= m_ || !next_in_order(u, Work::forward) || live_[static_cast<std::size_t>(u)] >= cap(u)) continue;
      if (s_.split_backward && std::ssize(weights_[static_cast<std::size_t>(stage)]) >= s_.stages) continue;
      if (u > 0 && f_done_[at(k, u - 1)] > t) continue;
      if (!best || k < best->micro_batch || (k == best->micro_batch && u > best_u)) {
        best = Op{.work = Work::forward, .micro_batch = k, .chunk = c};
        best_u = u;
      }
    }
    if (best) return best;
    const std::deque<Op>& waiting = weights_[static_cast<std::size_t>(stage)];  // 3. the oldest weight gradient
    if (!waiting.empty()) return waiting.front();
    return std::nullopt;
  }

  void start(int stage, const Op& op, long t) {
    const int u = s_.virtual_stage(stage, op.chunk);
    const auto su = static_cast<std::size_t>(u);
    if (!sequence_.empty()) sequence_[su].pop_front();
    long cost = 1;
    switch (op.work) {
      case Work::forward:
        f_done_[at(op.micro_batch, u)] = t + 1;
        ++next_f_[su];
        ++live_[su];
        break;
      case Work::backward:
        cost = 2;
        b_done_[at(op.micro_batch, u)] = t + 2;
        ++next_b_[su];
        --live_[su];
        break;
      case Work::backward_input:
        b_done_[at(op.micro_batch, u)] = t + 1;
        ++next_b_[su];
        --live_[su];
        weights_[static_cast<std::size_t>(stage)].push_back(
            Op{.work = Work::backward_weight, .micro_batch = op.micro_batch, .chunk = op.chunk});
        break;
      case Work::backward_weight:
        weights_[static_cast<std::size_t>(stage)].pop_front();
        break;
    }
    free_at_[static_cast<std::size_t>(stage)] = t + cost;
    s_.ops[static_cast<std::size_t>(stage)].push_back(op);
  }

  Schedule& s_;
  int u_count_;
  int m_;
  std::vector<long> f_done_, b_done_;  // [k][u]: when F (B, or B_input) of micro-batch k on u finished
  std::vector<int> next_f_, next_b_;   // [u]: the next micro-batch to forward, to backward
  std::vector<int> live_;              // [u]: micro-batches in flight (forwarded, input gradient not computed)
  std::vector<std::deque<Op>> weights_;  // [stage]: B_weight operations waiting
  std::vector<std::deque<Work>> sequence_;  // [u]: the wave's 1F1B order per virtual stage (empty otherwise)
  std::vector<long> free_at_;          // [stage]
};

}  // namespace

void list_schedule(Schedule& schedule) { Player(schedule).play(); }

}  // namespace optimus::pipeline::detail

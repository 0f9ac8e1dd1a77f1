// A per-rank timeline of what the program spends its time on, from the program's own steady-clock timers: SUMMA's
// GEMMs and its exposed communication (time spent waiting for a transfer), and each operation of optimus/core/ops.hpp
// run on the CPU by kind. Attach one to a Grid (Grid::set_timeline: SUMMA records into it, and the grid's queue
// carries it to the operations); read the totals, or write a Chrome trace (chrome://tracing, Perfetto) of all ranks.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "optimus/comm/communicator.hpp"

namespace optimus {

// compute: SUMMA's local GEMM (it contains the operations' gemm spans); comm_wait: waiting for a transfer (SUMMA's);
// gemm, elementwise, softmax: one operation on the CPU — GEMMs (batched too), the causal softmax, and everything else
// (LayerNorm, GELU, dropout, casts, adds and biases, the embedding, the loss, AdamW). On an accelerator operations are
// asynchronous and are not recorded.
enum class SpanKind { compute, comm_wait, gemm, elementwise, softmax };
inline constexpr int kSpanKinds = 5;
const char* name_of(SpanKind kind);

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  struct Span {
    SpanKind kind;
    double start_us, end_us;  // since the timeline's origin
  };

  Timeline() : origin_(Clock::now()) {}

  // Records [start, now) as a span of `kind`.
  void record(SpanKind kind, Clock::time_point start);
  void clear() { spans_.clear(); }

  const std::vector<Span>& spans() const { return spans_; }
  double total_us(SpanKind kind) const;

  // Collective over `comm`: rank 0 writes every rank's spans as a Chrome trace (pid = rank, one thread per kind).
  void write_chrome_trace(Communicator& comm, const std::string& path) const;

  // RAII for one operation: records a span of `kind` when it goes out of scope, unless another operation's span is
  // open (an operation that runs others — a bf16 GEMM casting its operands — counts as itself alone). No-op with a
  // null timeline.
  class Operation {
   public:
    Operation(Timeline* t, SpanKind kind)
        : t_(t != nullptr && !t->in_operation_ ? t : nullptr), kind_(kind), start_(Clock::now()) {
      if (t_ != nullptr) t_->in_operation_ = true;
    }
    Operation(const Operation&) = delete;
    Operation& operator=(const Operation&) = delete;
    ~Operation() {
      if (t_ == nullptr) return;
      t_->in_operation_ = false;
      t_->record(kind_, start_);
    }

   private:
    Timeline* t_;
    SpanKind kind_;
    Clock::time_point start_;
  };

  // RAII: records the span when it goes out of scope (no-op with a null timeline).
  class Scope {
   public:
    Scope(Timeline* t, SpanKind kind) : t_(t), kind_(kind), start_(Clock::now()) {}
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      if (t_ != nullptr) t_->record(kind_, start_);
    }

   private:
    Timeline* t_;
    SpanKind kind_;
    Clock::time_point start_;
  };

 private:
  Clock::time_point origin_;
  std::vector<Span> spans_;
  bool in_operation_ = false;
};

}  // namespace optimus

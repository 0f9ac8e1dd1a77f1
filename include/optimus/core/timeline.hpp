// A per-rank timeline of what the program spends its time on, from the program's own steady-clock timers: SUMMA's
// GEMMs and its exposed communication (time spent waiting for a transfer), and each operation of optimus/core/ops.hpp
// run on the CPU by kind. Name one in a grid handle's Execution (Grid::with: SUMMA records into it, and the handle's
// queue carries it to the operations); read the totals, or write a Chrome trace of all ranks (comm/chrome_trace.hpp).
#pragma once

#include <chrono>
#include <vector>

namespace optimus {

// compute: SUMMA's local GEMM (it contains the operations' gemm spans); comm_wait: waiting for a transfer (SUMMA's);
// gemm, elementwise, attention: one operation on the CPU — GEMMs (batched too), the fused attention, and everything
// else (LayerNorm, GELU, dropout, casts, adds and biases, the embedding, the loss, AdamW). On an accelerator operations
// are asynchronous and are not recorded.
enum class SpanKind { compute, comm_wait, gemm, elementwise, attention };
const char* name_of(SpanKind kind);

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  struct Span {
    SpanKind kind;
    double start_us, end_us;  // since the timeline's origin
  };

  Timeline() : origin_(Clock::now()) {}

  // Records [start, now), or [start, end), as a span of `kind`.
  void record(SpanKind kind, Clock::time_point start);
  void record(SpanKind kind, Clock::time_point start, Clock::time_point end);
  void clear() { spans_.clear(); }

  const std::vector<Span>& spans() const { return spans_; }
  double total_us(SpanKind kind) const;

  // RAII for one operation: records its time as spans of `kind`, exclusive of the operations it runs inside itself
  // (a GEMM's bias and GELU epilogue on the CPU is element-wise time, not the GEMM's): when an inner operation
  // starts, the outer one's span so far is recorded, and it resumes when the inner one ends. Spans never overlap.
  // No-op with a null timeline.
  class Operation {
   public:
    Operation(Timeline* t, SpanKind kind) : t_(t), kind_(kind) {
      if (t_ == nullptr) return;
      start_ = Clock::now();
      outer_ = t_->open_;
      if (outer_ != nullptr) t_->record(outer_->kind_, outer_->start_, start_);  // the outer one's piece so far
      t_->open_ = this;
    }
    Operation(const Operation&) = delete;
    Operation& operator=(const Operation&) = delete;
    ~Operation() {
      if (t_ == nullptr) return;
      const Clock::time_point end = Clock::now();
      t_->record(kind_, start_, end);
      t_->open_ = outer_;
      if (outer_ != nullptr) outer_->start_ = end;  // the outer one resumes
    }

   private:
    Timeline* t_;
    SpanKind kind_;
    Clock::time_point start_{};
    Operation* outer_ = nullptr;
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
  Operation* open_ = nullptr;  // the innermost operation running, if any
};

}  // namespace optimus

// A per-rank timeline of what the program spends its time on: compute spans (GEMMs) and exposed
// communication (time spent waiting for a transfer), from the program's own steady-clock timers. Attach one
// to a Grid (Grid::set_timeline) to record SUMMA; read the totals, or write a Chrome trace
// (chrome://tracing, Perfetto) of all ranks.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "optimus/comm/communicator.hpp"

namespace optimus {

enum class SpanKind { compute, comm_wait };

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
};

}  // namespace optimus

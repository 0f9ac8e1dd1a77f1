// Timeline: spans and totals.
#include "optimus/core/timeline.hpp"

#include "optimus/core/error.hpp"

namespace optimus {

const char* name_of(SpanKind kind) {
  switch (kind) {
    case SpanKind::compute: return "summa gemm";
    case SpanKind::comm_wait: return "wait for communication";
    case SpanKind::gemm: return "gemm";
    case SpanKind::elementwise: return "element-wise";
    case SpanKind::attention: return "attention";
  }
  return "?";
}

void Timeline::record(SpanKind kind, Clock::time_point start) { record(kind, start, Clock::now()); }

void Timeline::record(SpanKind kind, Clock::time_point start, Clock::time_point end) {
  const auto us = [&](Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - origin_).count(); };
  spans_.push_back({kind, us(start), us(end)});
}

double Timeline::total_us(SpanKind kind) const {
  double total = 0;
  for (const Span& s : spans_) {
    if (s.kind == kind) total += s.end_us - s.start_us;
  }
  return total;
}

}  // namespace optimus

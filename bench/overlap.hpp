// Blocking vs overlapped timing of a collective piece of work on a grid, with the grid's own timers.
// Both modes are timed (median of the max over ranks); the timeline splits each rank's time into SUMMA GEMMs
// (compute) and waits for SUMMA's communication (exposed communication); the rest of a rank's time is other
// work (element-wise layers, their small collectives) and idle.
//   overlap fraction = communication hidden / communication = 1 - exposed(overlapped) / exposed(blocking),
// exposed times summed over the grid's ranks: the blocking run's waits are the communication time.
#pragma once

#include <algorithm>
#include <string>

#include "optimus/comm/chrome_trace.hpp"
#include "optimus/core/timeline.hpp"
#include "optimus/grid/grid.hpp"
#include "timing.hpp"

namespace optimus::bench {

struct OverlapTiming {
  double overlapped_s = 0;   // the default mode
  double blocking_s = 0;
  double fraction = 0;       // communication hidden / communication, in [0, 1]
  double compute_s = 0;      // per run, the max over ranks, overlapped
  double exposed_s = 0;      // SUMMA communication waits per run, the max over ranks, overlapped
};

// Times the work `make(handle)` returns (a callable that runs it once, on objects it built on `handle`), with a
// handle of `grid` running SUMMA blocking, then with one overlapping it; both record into one timeline, and keep the
// rest of grid's execution. `trace`: a Chrome trace of the overlapped runs of every rank, when not empty.
template <class Make>
OverlapTiming time_blocking_and_overlapped(const Grid& grid, int warmup, int iters, const std::string& trace,
                                           Make&& make) {
  Communicator& comm = grid.grid();
  Timeline timeline;
  const auto handle = [&](bool overlap) {
    Execution e = grid.execution();
    e.overlap = overlap;
    e.timeline = &timeline;
    return grid.with(e);
  };
  const double runs = warmup + iters;
  OverlapTiming t;
  {
    auto blocking = make(handle(false));
    t.blocking_s = time_max_over_ranks(comm, warmup, iters, blocking);
  }
  const double exposed_blocking = timeline.total_us(SpanKind::comm_wait) / runs;
  timeline.clear();
  auto overlapped = make(handle(true));
  t.overlapped_s = time_max_over_ranks(comm, warmup, iters, overlapped);
  const double exposed = timeline.total_us(SpanKind::comm_wait) / runs;
  const double compute = timeline.total_us(SpanKind::compute) / runs;
  if (!trace.empty()) write_chrome_trace(timeline, comm, trace);
  const double communication = comm.all_reduce(exposed_blocking, ReduceOp::sum);
  const double hidden = communication - comm.all_reduce(exposed, ReduceOp::sum);
  t.fraction = communication > 0 ? std::clamp(hidden / communication, 0.0, 1.0) : 0.0;
  t.compute_s = comm.all_reduce(compute, ReduceOp::max) * 1e-6;
  t.exposed_s = comm.all_reduce(exposed, ReduceOp::max) * 1e-6;
  return t;
}

}  // namespace optimus::bench

// The Chrome trace of every rank's timeline.
#include "optimus/comm/chrome_trace.hpp"

#include <algorithm>
#include <sstream>

#include "optimus/core/output_file.hpp"

namespace optimus {

void write_chrome_trace(const Timeline& timeline, Communicator& comm, const std::string& path) {
  const std::vector<Timeline::Span>& spans = timeline.spans();
  // Every rank's spans as (kind, start, end) triples, gathered to every rank (sizes first).
  const double mine = static_cast<double>(spans.size());
  std::vector<double> counts(static_cast<std::size_t>(comm.size()));
  comm.all_gather(&mine, counts.data(), 1, DType::f64);
  double most = 0;
  for (double c : counts) most = std::max(most, c);
  const auto width = static_cast<std::size_t>(most) * 3;
  std::vector<double> packed(width, 0.0), all(width * static_cast<std::size_t>(comm.size()));
  for (std::size_t k = 0; k < spans.size(); ++k) {
    packed[3 * k] = static_cast<double>(static_cast<int>(spans[k].kind));
    packed[3 * k + 1] = spans[k].start_us;
    packed[3 * k + 2] = spans[k].end_us;
  }
  comm.all_gather(packed.data(), all.data(), width, DType::f64);
  if (comm.rank() != 0) return;
  std::ostringstream out;
  out << "{\"traceEvents\": [\n";
  bool first = true;
  for (int r = 0; r < comm.size(); ++r) {
    for (std::size_t k = 0; k < static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]); ++k) {
      const double* s = all.data() + static_cast<std::size_t>(r) * width + 3 * k;
      const int kind = static_cast<int>(s[0]);
      const bool waits = static_cast<SpanKind>(kind) == SpanKind::comm_wait;
      out << (first ? "" : ",\n") << "{\"name\": \"" << name_of(static_cast<SpanKind>(kind)) << "\", \"cat\": \""
          << (waits ? "comm" : "compute") << "\", \"ph\": \"X\", \"pid\": " << r << ", \"tid\": " << kind
          << ", \"ts\": " << s[1] << ", \"dur\": " << (s[2] - s[1]) << "}";
      first = false;
    }
  }
  out << "\n], \"displayTimeUnit\": \"ms\"}\n";
  write_file(path, out.str());
}

}  // namespace optimus

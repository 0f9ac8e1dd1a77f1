// Overlapped vs blocking SUMMA, bit for bit; and correctness under random communication delays.
#include "capture_binding.hpp"
#include "overlap_cases.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "../layers/layer_cases.hpp"
#include "delaying_communicator.hpp"
#include "polling_communicator.hpp"
#include "optimus/comm/chrome_trace.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/reference/gpt.hpp"
#include "optimus/reference/matmul.hpp"

namespace optimus::test {
namespace {

// The two local blocks bit for bit (read back to the host, wherever they live).
template <class T>
bool same_bits(const DistMatrix<T>& a, const DistMatrix<T>& b) {
  const auto x = a.local_to_host(), y = b.local_to_host();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), sizeof(T) * static_cast<std::size_t>(x.size())) == 0;
}

// A handle of `grid` that runs SUMMA overlapped or blocking, the rest of its execution kept.
Grid with_overlap(const Grid& grid, bool overlap) {
  Execution e = grid.execution();
  e.overlap = overlap;
  return grid.with(e);
}

// The operands of the products below, the same values on a given handle (SUMMA runs as its first operand's handle
// says).
template <class T>
struct Operands {
  Operands(const Grid& g, std::int64_t m, std::int64_t k, std::int64_t n)
      : a(g, m, k), b(g, k, n), bt(g, n, k), at(g, k, m), c0(g, m, n) {
    a.fill_random(1);
    b.fill_random(2);
    bt.fill_random(3);
    at.fill_random(4);
    c0.fill_random(5);
  }
  DistMatrix<T> a, b, bt, at, c0;
};

// Every product in both modes; returns whether all local blocks agree bit for bit.
template <class T>
void products_bitwise(const Grid& grid) {
  const int q = grid.q();
  const std::int64_t m = 5 * q, k = 3 * q, n = 7 * q;
  const Operands<T> overlapped(with_overlap(grid, true), m, k, n), blocking_ops(with_overlap(grid, false), m, k, n);
  for (int product = 0; product < 3; ++product) {
    DistMatrix<T> on = overlapped.c0.clone(), off = blocking_ops.c0.clone();
    for (bool overlap : {true, false}) {
      const Operands<T>& o = overlap ? overlapped : blocking_ops;
      DistMatrix<T>& c = overlap ? on : off;
      if (product == 0) summa_ab(T(0.5), o.a, o.b, T(-1.5), c);
      if (product == 1) summa_abt(T(0.5), o.a, o.bt, T(-1.5), c);
      if (product == 2) summa_atb(T(0.5), o.at, o.b, T(-1.5), c);
    }
    CAPTURE(product);
    CHECK(same_bits(on, off));
  }
  // The async forms with other products run while their last reduction is in flight (as in Linear2D's
  // backward): C untouched until finish(), then bitwise the blocking result. At q = 1 nothing is reduced: C is
  // written by the call, which returns the product finished.
  const Operands<T>& o = overlapped;
  const Operands<T>& x = blocking_ops;
  for (bool abt : {true, false}) {
    CAPTURE(abt);
    DistMatrix<T> blocking = x.c0.clone(), async = o.c0.clone(), between(grid, m, n), between_ref(grid, m, n);
    if (abt) summa_abt(T(0.5), x.a, x.bt, T(-1.5), blocking);
    if (!abt) summa_atb(T(0.5), x.at, x.b, T(-1.5), blocking);
    summa_atb(T(1), x.at, x.b, T(0), between_ref);
    PendingProduct<T> first =
        abt ? summa_abt_async(T(0.5), o.a, o.bt, T(-1.5), async) : summa_atb_async(T(0.5), o.at, o.b, T(-1.5), async);
    PendingProduct<T> pending = std::move(first);  // the reductions move over; `first` has nothing to finish
    CHECK(first.finished());
    summa_atb(T(1), o.at, o.b, T(0), between);
    if (grid.q() > 1) {
      CHECK(same_bits(async, o.c0));
      CHECK_FALSE(pending.finished());
    } else {
      CHECK(pending.finished());
      CHECK(same_bits(async, blocking));
    }
    pending.finish();
    CHECK(pending.finished());
    CHECK(same_bits(async, blocking));
    CHECK(same_bits(between, between_ref));
  }
}

}  // namespace

namespace {

// A GPT training step with overlapped and blocking SUMMA: loss and every gradient, bit for bit.
void gpt_step_bitwise(const Grid& grid) {
  const int q = grid.q();
  const GptConfig config = config_for(q, 2, 0.1);
  const LayerShapes s = shapes_for(q);
  const std::vector<int> tokens = random_tokens(s.batch * s.seq, config.vocab, 51);
  const std::vector<int> targets = random_tokens(s.batch * s.seq, config.vocab, 52);
  std::vector<double> losses;
  std::vector<std::map<std::string, GlobalMatrix>> grads;
  for (bool overlap : {true, false}) {
    Gpt2D<float> model(with_overlap(grid, overlap), config);
    losses.push_back(model.train_step(tokens, targets, s.batch, 1));
    grads.push_back(model.gather(true));
  }
  CHECK(std::memcmp(&losses[0], &losses[1], sizeof(double)) == 0);
  for (const auto& [name, g] : grads[0]) {
    CAPTURE_BINDING(name);
    CHECK(g == grads[1].at(name));
  }
}

// dp replicas reduce gradients bucket by bucket during backward, or each at once: bitwise the same gradients.
template <class T>
void data_parallel_overlap_case(const Grid& grid) {
  REQUIRE(grid.dp() >= 2);
  const int q = grid.q();
  const GptConfig config = config_for(q, 2, 0.1);
  const LayerShapes s = shapes_for(q);
  // Each replica its own batch.
  const auto replica = static_cast<std::uint64_t>(grid.dp_index());
  const std::vector<int> tokens = random_tokens(s.batch * s.seq, config.vocab, 61 + 2 * replica);
  const std::vector<int> targets = random_tokens(s.batch * s.seq, config.vocab, 62 + 2 * replica);
  std::vector<std::map<std::string, GlobalMatrix>> grads;
  for (bool overlap : {true, false}) {
    Gpt2D<T> model(with_overlap(grid, overlap), config);
    model.train_step(tokens, targets, s.batch, 1);
    grads.push_back(model.gather(true));
  }
  for (const auto& [name, g] : grads[0]) {
    CAPTURE_BINDING(name);
    CHECK(g == grads[1].at(name));
  }
}

}  // namespace

void check_overlap_bitwise(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  products_bitwise<double>(grid);
  check_overlap_bitwise_on(grid);
}

void check_overlap_bitwise_on(const Grid& grid) {
  products_bitwise<float>(grid);
  gpt_step_bitwise(grid);
}

void check_data_parallel_overlap(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  data_parallel_overlap_case<double>(grid);
}

void check_data_parallel_overlap_on(const Grid& grid) { data_parallel_overlap_case<float>(grid); }

void check_timeline(Communicator& world, int q, const std::string& path) {
  Timeline timeline;
  const Grid grid = Grid::create(world, q).with({.timeline = &timeline});
  DistMatrix<double> a(grid, 4 * q, 2 * q), b(grid, 2 * q, 3 * q);
  a.fill_random(1);
  b.fill_random(2);
  const DistMatrix<double> c = summa_ab(a, b);
  std::size_t gemms = 0;
  for (const Timeline::Span& s : timeline.spans()) {
    CHECK(s.end_us >= s.start_us);
    if (s.kind == SpanKind::compute) ++gemms;
  }
  CHECK(gemms == static_cast<std::size_t>(q));  // one GEMM per SUMMA step (one tile at this size)
  CHECK(timeline.total_us(SpanKind::compute) > 0);
  write_chrome_trace(timeline, grid.grid(), path);
  if (grid.grid().rank() == 0) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.rfind("{\"traceEvents\": [", 0) == 0);
    std::size_t events = 0;
    for (std::size_t at = text.find("\"ph\": \"X\""); at != std::string::npos; at = text.find("\"ph\": \"X\"", at + 1)) {
      ++events;
    }
    CHECK(events >= static_cast<std::size_t>(q * q * q));  // every rank's GEMMs at least
  }
}

// The same world told to need progress calls (as MPI does) and not to (as in-process ranks do): the products poll
// their requests between GEMM row tiles in the first case only, and are right in both (to rounding: row tiles may
// round differently from one GEMM).
void check_polling(Communicator& world, int q) {
  for (bool needs_calls : {false, true}) {
    CAPTURE(needs_calls);
    PollingCommunicator counted(world, needs_calls);
    Grid grid = Grid::create(counted, q);
    REQUIRE(grid.grid().needs_progress_calls() == needs_calls);  // the grid's communicators answer as the world
    const long before = counted.polls();
    const std::int64_t m = 256 * q, k = 3 * q, n = 2 * q;  // 256 rows per rank: four row tiles of 64 if tiled
    const reference::Matrix a = reference::random_matrix(m, k, 18), b = reference::random_matrix(k, n, 19);
    const auto A = DistMatrix<double>::from_global(grid, a), B = DistMatrix<double>::from_global(grid, b);
    CHECK(reference::compare_relative(summa_ab(A, B).to_global(), a * b, 1e-12).ok());
    const auto BT = DistMatrix<double>::from_global(grid, reference::Matrix(b.transpose()));
    CHECK(reference::compare_relative(summa_abt(A, BT).to_global(), a * b, 1e-12).ok());
    const auto AT = DistMatrix<double>::from_global(grid, reference::Matrix(a.transpose()));
    CHECK(reference::compare_relative(summa_atb(AT, B).to_global(), a * b, 1e-12).ok());
    CHECK((counted.polls() > before) == needs_calls);
  }
}

void check_random_delays(Communicator& world, int q) {
  DelayingCommunicator slow(world, 1234u + static_cast<unsigned>(world.rank()) * 7919u, 300);
  const Grid base = Grid::create(slow, q);
  for (bool overlap : {true, false}) {
    const Grid grid = with_overlap(base, overlap);
    const std::int64_t m = 4 * q, k = 6 * q, n = 2 * q;
    const reference::Matrix a = reference::random_matrix(m, k, 8), b = reference::random_matrix(k, n, 9);
    const auto A = DistMatrix<double>::from_global(grid, a);
    const auto B = DistMatrix<double>::from_global(grid, b);
    CHECK(reference::compare_relative(summa_ab(A, B).to_global(), a * b, 1e-12).ok());
    const auto BT = DistMatrix<double>::from_global(grid, reference::Matrix(b.transpose()));
    CHECK(reference::compare_relative(summa_abt(A, BT).to_global(), a * b, 1e-12).ok());
    const auto AT = DistMatrix<double>::from_global(grid, reference::Matrix(a.transpose()));
    CHECK(reference::compare_relative(summa_atb(AT, B).to_global(), a * b, 1e-12).ok());
  }
  // A whole GPT step under delays matches the reference.
  const GptConfig config = config_for(q, 2, 0.1);
  const LayerShapes s = shapes_for(q);
  const std::vector<int> tokens = random_tokens(s.batch * s.seq, config.vocab, 71);
  const std::vector<int> targets = random_tokens(s.batch * s.seq, config.vocab, 72);
  Gpt2D<double> model(base, config);  // overlapped
  const double loss = model.train_step(tokens, targets, s.batch, 2);
  const auto ref = reference::gpt_forward_backward(config, reference::gpt_init(config), tokens, targets, s.batch, 2);
  CHECK(std::abs(loss - ref.loss) <= 1e-10 * ref.loss);
  for (const auto& [name, g] : model.gather(true)) {
    CAPTURE_BINDING(name);
    CHECK(reference::compare_relative(g, ref.grads.at(name), 1e-10).ok());
  }
}

}  // namespace optimus::test

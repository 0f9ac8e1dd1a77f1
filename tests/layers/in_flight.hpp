// Several batches in flight: k contexts of one layer alive at once, their backwards taken in reverse, forward or an
// interleaved order, each context's output and input gradient checked against the reference, and the parameter
// gradients (accumulated over the k backwards) against the sum of the reference's.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "optimus/core/memory.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/reference/compare.hpp"
#include "optimus/reference/gpt.hpp"

namespace optimus::test {

enum class Order { reverse, forward, interleaved };

struct InFlight {
  int contexts = 1;
  Order order = Order::reverse;
};

// One step of a schedule: the forward or the backward of context `context`.
struct Step {
  bool forward = true;
  int context = 0;
};

// reverse: F0 .. F(k-1) then B(k-1) .. B0; forward: F0 .. F(k-1) then B0 .. B(k-1); interleaved (k = 4): forwards
// and backwards mixed and backwards out of order, F0 F1 F2 B1 F3 B0 B3 B2.
inline std::vector<Step> schedule(const InFlight& f) {
  std::vector<Step> steps;
  if (f.order == Order::interleaved) {
    REQUIRE(f.contexts == 4);
    for (const auto& [forward, c] : {std::pair{true, 0}, {true, 1}, {true, 2}, {false, 1}, {true, 3}, {false, 0},
                                     {false, 3}, {false, 2}}) {
      steps.push_back({.forward = forward, .context = c});
    }
    return steps;
  }
  for (int c = 0; c < f.contexts; ++c) steps.push_back({.forward = true, .context = c});
  for (int k = 0; k < f.contexts; ++k) {
    steps.push_back({.forward = false, .context = f.order == Order::forward ? k : f.contexts - 1 - k});
  }
  return steps;
}

inline std::string describe(const InFlight& f) {
  const char* order = f.order == Order::reverse ? "reverse" : f.order == Order::forward ? "forward" : "interleaved";
  return std::to_string(f.contexts) + " contexts, backward in " + order + " order";
}

// The scenarios a layer is checked under: 1 context; 2 in reverse order; 4 in forward order; 4 interleaved. With
// `all` false, only 1 and 4 interleaved (the f32 runs, whose arithmetic the f64 runs already cover).
inline std::vector<InFlight> in_flight_cases(bool all) {
  if (!all) return {{.contexts = 1, .order = Order::reverse}, {.contexts = 4, .order = Order::interleaved}};
  return {{.contexts = 1, .order = Order::reverse},
          {.contexts = 2, .order = Order::reverse},
          {.contexts = 4, .order = Order::forward},
          {.contexts = 4, .order = Order::interleaved}};
}

// What the reference says a layer computes for one context: its output, its input gradient (an empty matrix where the
// layer has none, as the embedding) and its parameters' gradients.
struct Expected {
  reference::Matrix output, input_grad;
  reference::Parameters grads;
};

// What a layer computes for context c, and what the reference says it should (`expected`, asked once per context).
// `backward` returns the input gradient, or an empty matrix where the layer has none.
template <class Context>
struct LayerRun {
  std::function<reference::Matrix(int c, Context& saved)> forward;
  std::function<reference::Matrix(int c, Context saved)> backward;
  std::function<Expected(int c)> expected;
  bool saves_tracked = true;  // whether its context holds tensors the grid's tracker counts
};

// Runs `f`'s schedule and checks every figure within `tol`; `gather` returns a parameter's accumulated gradient.
// Also checks that a context dropped without backward frees what it held, and that backward frees everything.
template <class Context>
void run_in_flight(const InFlight& f, const LayerRun<Context>& run, MemoryTracker& memory, double tol,
                   const std::vector<std::string>& names,
                   const std::function<reference::Matrix(const std::string&)>& gather) {
  CAPTURE(describe(f));
  CAPTURE(tol);
  const auto close = [&](const char* what, int c, const reference::Matrix& got, const reference::Matrix& expected) {
    const reference::Comparison cmp = reference::compare_relative(got, expected, tol);
    const std::string operand = what;  // CAPTURE of a const char* prints the pointer
    CAPTURE(operand);
    CAPTURE(c);
    CAPTURE(cmp);
    CHECK(cmp.ok());
  };
  const std::uint64_t before = memory.current(MemoryKind::activations);
  {
    Context dropped;
    run.forward(0, dropped);
    if (run.saves_tracked) CHECK(memory.current(MemoryKind::activations) > before);
  }
  CHECK(memory.current(MemoryKind::activations) == before);  // dropping a context frees it

  std::vector<Expected> expected;  // [contexts]
  for (int c = 0; c < f.contexts; ++c) expected.push_back(run.expected(c));
  std::vector<Context> saved(static_cast<std::size_t>(f.contexts));
  for (const Step& step : schedule(f)) {
    const auto c = static_cast<std::size_t>(step.context);
    if (step.forward) {
      close("output", step.context, run.forward(step.context, saved[c]), expected[c].output);
    } else {
      const reference::Matrix dx = run.backward(step.context, std::move(saved[c]));
      if (dx.size() > 0) close("input gradient", step.context, dx, expected[c].input_grad);
    }
  }
  CHECK(memory.current(MemoryKind::activations) == before);  // every backward freed its context

  reference::Parameters total;
  for (const Expected& e : expected) {
    for (const auto& [name, g] : e.grads) {
      if (total.count(name) == 0) total[name] = reference::Matrix::Zero(g.rows(), g.cols());
      total[name] += g;
    }
  }
  for (const std::string& name : names) {
    CAPTURE(name);
    close("parameter gradient", -1, gather(name), total.at(name));
  }
}

}  // namespace optimus::test

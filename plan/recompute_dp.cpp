// Galvatron's dynamic programme over blocks (recompute_dp.hpp).
#include "optimus/plan/recompute_dp.hpp"

#include <limits>

#include "optimus/core/error.hpp"

namespace optimus::plan {

DpChoice choose_strategies(const std::vector<std::vector<StrategyCost>>& options, std::int64_t budget,
                           std::int64_t unit, const std::function<double(int, int, int)>& transition) {
  OPTIMUS_CHECK(unit >= 1, "recomputation programme: a memory unit of ", unit, " bytes");
  DpChoice out;
  if (budget < 0) return out;
  const auto layers = options.size();
  if (layers == 0) return DpChoice{.feasible = true, .seconds = 0, .memory = 0, .strategy = {}};
  const std::size_t strategies = options[0].size();
  OPTIMUS_CHECK(strategies > 0, "recomputation programme: block 0 has no strategy");
  const auto units = static_cast<std::size_t>(budget / unit);
  constexpr double kNever = std::numeric_limits<double>::infinity();
  // f(i, v, s): the least time of blocks 0..i within v units with block i under s; from(i, v, s): block i-1's s'.
  // One flat table each (layers x (units + 1) x strategies): thousands of blocks are one allocation, not millions.
  std::vector<double> f_table(layers * (units + 1) * strategies, kNever);
  std::vector<int> from_table(f_table.size(), -1);
  const auto at = [&](std::size_t i, std::size_t v, std::size_t s) { return (i * (units + 1) + v) * strategies + s; };
  const auto f = [&](std::size_t i, std::size_t v, std::size_t s) -> double& { return f_table[at(i, v, s)]; };
  const auto from = [&](std::size_t i, std::size_t v, std::size_t s) -> int& { return from_table[at(i, v, s)]; };
  const auto need = [&](std::size_t i, std::size_t s) {
    const std::int64_t m = options[i][s].memory;
    OPTIMUS_CHECK(m >= 0, "recomputation programme: block ", i, " strategy ", s, " holds ", m, " bytes");
    return static_cast<std::size_t>((m + unit - 1) / unit);
  };
  for (std::size_t i = 0; i < layers; ++i) {
    OPTIMUS_CHECK(options[i].size() == strategies, "recomputation programme: block ", i, " has ", options[i].size(),
                  " strategies, block 0 ", strategies);
    for (std::size_t v = 0; v <= units; ++v) {
      for (std::size_t s = 0; s < strategies; ++s) {
        const std::size_t m = need(i, s);
        if (m > v) continue;
        const double c = options[i][s].seconds;
        if (i == 0) {
          f(i, v, s) = c;
          continue;
        }
        for (std::size_t p = 0; p < strategies; ++p) {
          const double before = f(i - 1, v - m, p);
          if (before == kNever) continue;
          const double total = before + transition(static_cast<int>(i), static_cast<int>(p), static_cast<int>(s)) + c;
          if (total < f(i, v, s)) {
            f(i, v, s) = total;
            from(i, v, s) = static_cast<int>(p);
          }
        }
      }
    }
  }
  std::size_t best = 0;
  for (std::size_t s = 1; s < strategies; ++s) {
    if (f(layers - 1, units, s) < f(layers - 1, units, best)) best = s;
  }
  if (f(layers - 1, units, best) == kNever) return out;
  out.feasible = true;
  out.seconds = f(layers - 1, units, best);
  out.strategy.assign(layers, 0);
  std::size_t v = units, s = best;
  for (std::size_t i = layers; i-- > 0;) {
    out.strategy[i] = static_cast<int>(s);
    out.memory += options[i][s].memory;
    const int p = from(i, v, s);
    v -= need(i, s);
    if (i > 0) s = static_cast<std::size_t>(p);
  }
  return out;
}

}  // namespace optimus::plan

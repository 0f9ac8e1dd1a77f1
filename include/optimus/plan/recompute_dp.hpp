// Recomputation per block by Galvatron's dynamic programme (Miao et al., "Galvatron: Efficient Transformer Training
// over Multiple GPUs Using Automatic Parallelism", VLDB 2023, section 3.3), over the blocks i = 1 .. L of one stage
// with a memory budget V:
//   f_i(v, s) = min over s' of  f_{i-1}(v - m_i(s), s') + R_i(s', s) + c_i(s),      f_0(v, -) = 0 for v >= 0
// s: block i's strategy (here its recomputation policy: none, selective, full), m_i(s): the memory it holds (its saved
// activations times the micro-batches in flight), c_i(s): its time, R_i(s', s): the cost of moving from block i-1's
// strategy to block i's (Galvatron's resharding between layouts; 0 between recomputation policies, which change no
// layout, but kept so that the programme is Galvatron's). The answer is min over s of f_L(V, s), and the choices by
// walking back. Memory is counted in whole units of `unit` bytes, every m_i(s) rounded up (so a choice that fits in
// units fits in bytes): O(L S^2 V/unit).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace optimus::plan {

struct StrategyCost {
  std::int64_t memory = 0;  // bytes
  double seconds = 0;
};

struct DpChoice {
  bool feasible = false;
  double seconds = 0;         // sum of c_i and R_i along the choice
  std::int64_t memory = 0;    // bytes, exactly (the sum of m_i of the choice)
  std::vector<int> strategy;  // [L]: each block's strategy index
};

// options[i][s]: block i's cost under strategy s (every block the same number of strategies). Throws optimus::Error
// for an empty strategy list, unit < 1 or a negative memory.
DpChoice choose_strategies(const std::vector<std::vector<StrategyCost>>& options, std::int64_t budget,
                           std::int64_t unit, const std::function<double(int layer, int from, int to)>& transition);

}  // namespace optimus::plan

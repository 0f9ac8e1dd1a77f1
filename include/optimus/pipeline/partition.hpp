// Which of the model's parts each virtual stage of a pipeline schedule holds (schedule.hpp's placement): the L
// transformer blocks are cut into U = S*v equal runs, virtual stage u holding blocks [u*L/U, (u+1)*L/U); the
// embedding goes with u = 0, ln_f and the LM head with u = U-1. For L = 8, S = 4, v = 2 each virtual stage holds one
// block; in the wave, stage 0 holds blocks 0 and 7 with the embedding and the head, so the tied wte lives on one stage.
#pragma once

#include <cstdint>

#include "optimus/pipeline/schedule.hpp"

namespace optimus::pipeline {

struct LayerRange {
  std::int64_t first = 0;  // the first block
  std::int64_t count = 0;  // blocks first .. first + count - 1
  bool embedding = false;  // u = 0
  bool head = false;       // u = U-1: ln_f and the LM head
};

// Throws optimus::Error unless S*v divides `layers` (each virtual stage the same number of blocks, at least one).
void check_layers(std::int64_t layers, int stages, int chunks);

// The blocks (and ends of the model) of virtual stage u; check_layers first.
LayerRange layers_of(const Schedule& schedule, std::int64_t layers, int virtual_stage);

}  // namespace optimus::pipeline

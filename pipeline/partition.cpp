// The model's blocks cut among virtual stages (partition.hpp).
#include "optimus/pipeline/partition.hpp"

#include "optimus/core/error.hpp"

namespace optimus::pipeline {

void check_layers(std::int64_t layers, int stages, int chunks) {
  const std::int64_t pieces = static_cast<std::int64_t>(stages) * chunks;
  OPTIMUS_CHECK(pieces >= 1 && layers >= pieces && layers % pieces == 0, "pipeline: ", layers,
                " layers do not divide among ", stages, " stages x ", chunks, " chunks (", pieces,
                " pieces of equal, non-zero size)");
}

LayerRange layers_of(const Schedule& schedule, std::int64_t layers, int virtual_stage) {
  check_layers(layers, schedule.stages, schedule.chunks);
  const int pieces = schedule.virtual_stages();
  OPTIMUS_CHECK(virtual_stage >= 0 && virtual_stage < pieces, "pipeline: virtual stage ", virtual_stage,
                " is not in [0, ", pieces, ")");
  const std::int64_t per = layers / pieces;
  return LayerRange{.first = virtual_stage * per,
                    .count = per,
                    .embedding = virtual_stage == 0,
                    .head = virtual_stage == pieces - 1};
}

}  // namespace optimus::pipeline

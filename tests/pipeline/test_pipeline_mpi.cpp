// The GPT through a pipeline under mpiexec: every schedule whose dp x pp x q x q fits the world, bitwise equal to
// pp = 1 (computed in-process on each rank beside it).
#include <doctest/doctest.h>

#include "pipeline_gpt_cases.hpp"
#include "test_world.hpp"

namespace pp = optimus::pipeline;
using optimus::test::PipelineCase;

TEST_CASE("MPI: every schedule gives pp = 1's loss and gradients bit for bit") {
  optimus::Communicator& world = optimus::test::world();
  for (const PipelineCase& c :
       {PipelineCase{1, 2, 1, pp::Kind::one_f_one_b, 1, 2, 4}, PipelineCase{1, 4, 1, pp::Kind::gpipe, 1, 4, 4},
        PipelineCase{1, 4, 1, pp::Kind::one_f_one_b, 1, 4, 4}, PipelineCase{1, 4, 1, pp::Kind::interleaved, 2, 8, 4},
        PipelineCase{1, 4, 1, pp::Kind::wave, 2, 8, 4}, PipelineCase{2, 2, 1, pp::Kind::wave, 2, 4, 4},
        PipelineCase{1, 2, 2, pp::Kind::interleaved, 2, 4, 4}, PipelineCase{1, 2, 2, pp::Kind::wave, 2, 4, 4},
        PipelineCase{2, 2, 2, pp::Kind::one_f_one_b, 1, 2, 4}, PipelineCase{1, 4, 1, pp::Kind::wave, 2, 8, 8},
        PipelineCase{1, 2, 1, pp::Kind::gpipe, 1, 2, 8}}) {
    if (c.dp * c.stages * c.q * c.q != world.size()) continue;
    optimus::test::check_pipeline_gpt(world, c, *optimus::test::pipeline_reference(c));  // pp = 1 on each rank
  }
}

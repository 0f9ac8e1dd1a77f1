// The GPT through a pipeline under mpiexec: every schedule whose dp x pp x q x q fits the world, bitwise equal to
// pp = 1 (computed in-process on each rank beside it).
#include <doctest/doctest.h>

#include "pipeline_gpt_cases.hpp"
#include "test_world.hpp"

namespace pp = optimus::pipeline;
using optimus::test::PipelineCase;

// The acceptance matrix: every schedule at pp = 2 and 4 (q = 1), pp = 2 x q = 2 and dp = 2 x pp = 2 x q = 2, with
// m = 4 and 8, and m = 8 executed message-driven too; each world size runs its part (np 2, 4, 8, 16).
TEST_CASE("MPI: every schedule gives pp = 1's loss and gradients bit for bit") {
  optimus::Communicator& world = optimus::test::world();
  struct Layout {
    int dp, stages, q;
  };
  int ran = 0;
  // pp = 1's results, once per shape for every schedule (each rank computes them in-process: at 16 ranks on few cores,
  // the bulk of the suite's time).
  optimus::test::PipelineReferences references;
  for (const Layout l : {Layout{1, 2, 1}, Layout{1, 4, 1}, Layout{1, 2, 2}, Layout{2, 2, 2}}) {
    if (l.dp * l.stages * l.q * l.q != world.size()) continue;
    for (const pp::Kind kind :
         {pp::Kind::gpipe, pp::Kind::one_f_one_b, pp::Kind::interleaved, pp::Kind::wave, pp::Kind::zero_bubble}) {
      const int chunks = kind == pp::Kind::interleaved || kind == pp::Kind::wave ? 2 : 1;
      for (const int m : {4, 8}) {
        PipelineCase c{l.dp, l.stages, l.q, kind, chunks, static_cast<std::int64_t>(l.stages) * chunks, m};
        optimus::test::check_pipeline_gpt(world, c, references.of(c));
        ++ran;
        if (m != 8) continue;
        c.order = pp::Order::dynamic;  // message-driven, over MPI's tags (and the stage's broadcast of its choices)
        optimus::test::check_pipeline_gpt(world, c, references.of(c));
        ++ran;
      }
    }
  }
  CHECK(ran == 15);  // each world size is one of the layouts
}

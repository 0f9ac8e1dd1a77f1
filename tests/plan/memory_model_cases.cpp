// The planner's memory model against the memory trackers of real runs (plan/run.hpp), in-process: for 2D and 1D, with
// and without pipelines, micro-batches and recomputation per block, every rank's peak of parameters, gradients,
// optimizer state and saved activations equals the prediction for its stage exactly.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "optimus/plan/memory_model.hpp"
#include "optimus/plan/run.hpp"
#include "test_world.hpp"

namespace {

using optimus::Recompute;
using optimus::plan::Layout;
using optimus::plan::TensorParallel;
namespace pp = optimus::pipeline;

optimus::plan::Workload small_gpt(std::int64_t layers, double dropout) {
  optimus::GptConfig c;
  c.vocab = 72;  // stored: 128 (q = 1), 256 (q = 2), 128 * t (1D)
  c.hidden = 32;
  c.heads = 4;
  c.ffn = 48;
  c.layers = layers;
  c.max_seq = 8;
  c.dropout = dropout;
  return optimus::plan::Workload{.config = c, .global_batch = 8, .seq = 8, .element_bytes = 4, .saved_bytes = 4};
}

std::vector<Recompute> policies(std::initializer_list<Recompute> p) { return p; }

void check_layout(const Layout& l, const optimus::plan::Workload& w) {
  INFO(optimus::plan::describe(l));
  const std::vector<optimus::plan::MemoryPrediction> predicted = optimus::plan::predict_memory_by_stage(l, w);
  REQUIRE(predicted.size() == static_cast<std::size_t>(l.pp));
  std::vector<optimus::plan::Measured> measured(static_cast<std::size_t>(l.ranks()));
  optimus::test::run_in_process(l.ranks(), [&](optimus::Communicator& world) {
    measured[static_cast<std::size_t>(world.rank())] = optimus::plan::run_plan(world, l, w, 0, 2);
  });
  for (std::size_t rank = 0; rank < measured.size(); ++rank) {
    const optimus::plan::Measured& m = measured[rank];
    INFO("rank " << rank << ", stage " << m.stage);
    const optimus::plan::MemoryPrediction& p = predicted[static_cast<std::size_t>(m.stage)];
    CHECK(m.device.parameters == p.device.parameters);
    CHECK(m.device.gradients == p.device.gradients);
    CHECK(m.device.optimizer == p.device.optimizer);
    CHECK(m.device.activations == p.device.activations);
    CHECK(m.host.total() == 0);  // CPU ranks: their memory is the plan's device memory
  }
}

}  // namespace

TEST_CASE("memory model: every kind's peak per rank equals the trackers' (2D, 1D, pipelines, recomputation)") {
  const auto w4 = small_gpt(4, 0.1);
  const auto none4 = policies({Recompute::none, Recompute::none, Recompute::none, Recompute::none});
  const auto mixed = policies({Recompute::none, Recompute::full, Recompute::selective, Recompute::full});
  const auto top_full = policies({Recompute::selective, Recompute::none, Recompute::none, Recompute::full});
  const Layout layouts[] = {
      {.tensor = TensorParallel::two_d,
       .tp = 4,
       .dp = 1,
       .pp = 1,
       .schedule = pp::Kind::one_f_one_b,
       .chunks = 1,
       .micro_batches = 1,
       .offload = optimus::Offload::none,
       .recompute = none4},
      {.tensor = TensorParallel::two_d,
       .tp = 4,
       .dp = 1,
       .pp = 1,
       .schedule = pp::Kind::one_f_one_b,
       .chunks = 1,
       .micro_batches = 2,
       .offload = optimus::Offload::none,
       .recompute = mixed},
      {.tensor = TensorParallel::two_d,
       .tp = 1,
       .dp = 2,
       .pp = 1,
       .schedule = pp::Kind::one_f_one_b,
       .chunks = 1,
       .micro_batches = 2,
       .offload = optimus::Offload::none,
       .recompute = top_full},
      {.tensor = TensorParallel::two_d,
       .tp = 1,
       .dp = 2,
       .pp = 2,
       .schedule = pp::Kind::one_f_one_b,
       .chunks = 1,
       .micro_batches = 4,
       .offload = optimus::Offload::none,
       .recompute = none4},
      {.tensor = TensorParallel::two_d,
       .tp = 1,
       .dp = 1,
       .pp = 2,
       .schedule = pp::Kind::wave,
       .chunks = 2,
       .micro_batches = 4,
       .offload = optimus::Offload::none,
       .recompute = none4},
      {.tensor = TensorParallel::two_d,
       .tp = 1,
       .dp = 1,
       .pp = 4,
       .schedule = pp::Kind::zero_bubble,
       .chunks = 1,
       .micro_batches = 4,
       .offload = optimus::Offload::none,
       .recompute = none4},
      {.tensor = TensorParallel::two_d,
       .tp = 4,
       .dp = 1,
       .pp = 2,
       .schedule = pp::Kind::interleaved,
       .chunks = 2,
       .micro_batches = 2,
       .offload = optimus::Offload::none,
       .recompute = none4},
      {.tensor = TensorParallel::one_d,
       .tp = 4,
       .dp = 1,
       .pp = 1,
       .schedule = pp::Kind::one_f_one_b,
       .chunks = 1,
       .micro_batches = 2,
       .offload = optimus::Offload::none,
       .recompute = none4},
      {.tensor = TensorParallel::one_d,
       .tp = 2,
       .dp = 1,
       .pp = 1,
       .schedule = pp::Kind::one_f_one_b,
       .chunks = 1,
       .micro_batches = 1,
       .offload = optimus::Offload::none,
       .recompute = mixed},
      {.tensor = TensorParallel::one_d,
       .tp = 2,
       .dp = 1,
       .pp = 2,
       .schedule = pp::Kind::gpipe,
       .chunks = 1,
       .micro_batches = 4,
       .offload = optimus::Offload::none,
       .recompute = none4},
      {.tensor = TensorParallel::one_d,
       .tp = 2,
       .dp = 1,
       .pp = 2,
       .schedule = pp::Kind::zero_bubble,
       .chunks = 1,
       .micro_batches = 2,
       .offload = optimus::Offload::none,
       .recompute = none4},
  };
  for (const Layout& l : layouts) check_layout(l, w4);
}

TEST_CASE("memory model: a model of RMSNorm blocks without biases (2D and 1D) equals the trackers") {
  auto w = small_gpt(2, 0.1);
  w.config.block.norm = {.kind = optimus::NormSpec::Kind::rmsnorm, .eps = 1e-6};
  w.config.block.bias = false;
  const auto none2 = policies({Recompute::none, Recompute::none});
  for (const TensorParallel tensor : {TensorParallel::two_d, TensorParallel::one_d}) {
    check_layout({.tensor = tensor,
                  .tp = 4,
                  .dp = 1,
                  .pp = 1,
                  .schedule = pp::Kind::one_f_one_b,
                  .chunks = 1,
                  .micro_batches = 1,
                  .offload = optimus::Offload::none,
                  .recompute = none2},
                 w);
  }
}

TEST_CASE("memory model: Llama's blocks (2D and 1D, whole and in a 2-stage pipeline, the head untied) equal the trackers") {
  auto w = small_gpt(2, 0.1);
  w.config.block = optimus::BlockConfig::llama(500, 2);  // 4 heads of 8, 2 key/value heads; SwiGLU of ffn 48
  const auto none2 = policies({Recompute::none, Recompute::none});
  const auto full2 = policies({Recompute::full, Recompute::none});
  for (const TensorParallel tensor : {TensorParallel::two_d, TensorParallel::one_d}) {
    for (const int pp : {1, 2}) {
      check_layout({.tensor = tensor,
                    .tp = tensor == TensorParallel::two_d ? 4 : 2,
                    .dp = 1,
                    .pp = pp,
                    .schedule = pp::Kind::one_f_one_b,
                    .chunks = 1,
                    .micro_batches = 2,
                    .offload = optimus::Offload::none,
                    .recompute = pp == 1 ? full2 : none2},
                   w);
    }
  }
}

TEST_CASE("memory model: BERT's model (token types, the embeddings' norm, the masked-LM head; 2D and 1D, whole and in 2-stage pipelines, "
          "1f1b and the split backward) equals the trackers") {
  auto w = small_gpt(2, 0.1);
  w.config.block.mlp = optimus::MlpKind::gelu_erf;
  w.config.block.post_norm = true;
  w.config.block.bidirectional = true;
  w.config.block.token_types = 3;
  w.config.block.embedding_norm = true;
  w.config.block.head_transform = true;
  const auto none2 = policies({Recompute::none, Recompute::none});
  const auto full2 = policies({Recompute::full, Recompute::none});
  for (const TensorParallel tensor : {TensorParallel::two_d, TensorParallel::one_d}) {
    for (const pp::Kind kind : {pp::Kind::one_f_one_b, pp::Kind::zero_bubble}) {
      for (const int stages : {1, 2}) {
        if (stages == 1 && kind == pp::Kind::zero_bubble) continue;
        CAPTURE(stages);
        check_layout({.tensor = tensor,
                      .tp = tensor == TensorParallel::two_d ? 4 : 2,
                      .dp = 1,
                      .pp = stages,
                      .schedule = kind,
                      .chunks = 1,
                      .micro_batches = 2,
                      .offload = optimus::Offload::none,
                      .recompute = stages == 1 ? full2 : none2},
                     w);
      }
    }
  }
}

TEST_CASE("memory model: a pipeline's offloaded moments are the host's, the head stage's less wpe's (no wrap)") {
  // The head's stage holds wpe without moments. With the optimizer offloaded the moments are on the host: the
  // correction was taken from the device's few update buffers, and wrapped to 1.8e19 bytes (optimus-plan printed
  // 17592186044172.0 MiB for such plans).
  const auto w = small_gpt(2, 0.0);
  for (const optimus::Offload mode : optimus::all_offload_modes()) {
    CAPTURE(optimus::name_of(mode));
    const Layout l{.tensor = TensorParallel::two_d, .tp = 1, .dp = 1, .pp = 2, .schedule = pp::Kind::one_f_one_b,
                   .chunks = 1, .micro_batches = 2, .offload = mode, .recompute = {}};
    Layout plain = l;
    plain.offload = optimus::Offload::none;
    const auto offloaded = optimus::plan::predict_memory_by_stage(l, w);
    const auto kept = optimus::plan::predict_memory_by_stage(plain, w);
    for (std::size_t s = 0; s < 2; ++s) {
      CAPTURE(s);
      // No size wrapped: the device holds the update's buffers (6 chunks), a few per cent of the plain layout's.
      CHECK(offloaded[s].device.total() < 2 * kept[s].device.total());
      // Every moment the plain layout keeps on the device is the host's once offloaded (the head stage's less wpe's);
      // spilling adds the blocks'.
      if (mode == optimus::Offload::optimizer) CHECK(offloaded[s].host.optimizer == kept[s].device.optimizer);
      if (mode != optimus::Offload::none) CHECK(offloaded[s].host.optimizer >= kept[s].device.optimizer);
    }
  }
}

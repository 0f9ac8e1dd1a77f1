// Checkpoints of models whose blocks are not GPT-2's (GptConfig::block): metadata.json records the block, a load checks
// it, and GPT-2's files refuse such a model (in-process ranks).
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optimus/optimus.hpp>
#include <string>
#include <vector>

#include "capture_binding.hpp"
#include "checkpoint_support.hpp"
#include "test_world.hpp"

namespace fs = std::filesystem;
using optimus::GlobalMatrix;
using optimus::test::batch_of;
using optimus::test::fresh_directory;
using optimus::test::gather_state;
using optimus::test::small_config;

namespace {

// One training step of a model of `config` on a 2x2 grid (4 in-process ranks), saved to dir/step_1; `also` then runs on
// every rank with the trained model. Returns rank 0's gathered state (every parameter and both moments).
std::map<std::string, GlobalMatrix> train_and_save_on_2x2(
    const fs::path& dir, const optimus::GptConfig& config,
    const std::function<void(optimus::Gpt2D<float>&, int rank)>& also) {
  std::map<std::string, GlobalMatrix> saved;
  optimus::test::run_in_process(4, [&](optimus::Communicator& w) {
    const optimus::Grid grid = optimus::Grid::create(w, 2);
    optimus::Gpt2D<float> model(grid, config);
    optimus::AdamW<float> optimizer(grid, model.parameters(), {.config = optimus::AdamWConfig{.lr = 3e-3}});
    std::vector<int> tokens, targets;
    batch_of(1, 0, 1, tokens, targets);
    model.zero_grad();
    model.train_step(tokens, targets, optimus::test::global_batch, 1);
    optimizer.step();
    optimus::checkpoint::save(dir / "step_1", model, &optimizer, {.step = 1, .extra = {}});
    auto state = gather_state(model, optimizer, grid.grid(), grid.device());
    also(model, w.rank());
    if (w.rank() == 0) saved = std::move(state);
  });
  return saved;
}

// Every tensor of `state` bitwise `saved`'s, and no other.
void check_same_state(const std::map<std::string, GlobalMatrix>& state,
                      const std::map<std::string, GlobalMatrix>& saved) {
  REQUIRE(state.size() == saved.size());
  for (const auto& [name, value] : saved) {
    CAPTURE_BINDING(name);
    CHECK(state.at(name) == value);
  }
}

// train_and_save_on_2x2, each rank also trying GPT-2's file format: its refusals, one per rank, in `refusals`.
std::map<std::string, GlobalMatrix> save_trying_gpt2_export(const fs::path& dir, const optimus::GptConfig& config,
                                                            std::vector<std::string>& refusals) {
  refusals.assign(4, "");
  return train_and_save_on_2x2(dir, config, [&](optimus::Gpt2D<float>& model, int rank) {
    try {
      optimus::checkpoint::export_hf((dir / "gpt2.safetensors").string(), model);
    } catch (const optimus::Error& e) {
      refusals[static_cast<std::size_t>(rank)] = e.message();
    }
  });
}

// dir's step_1 reloads bitwise `saved` into `config` at q = 1, and a model of `other` refuses it with `refusal`.
void reloads_at_q1_not_as(const fs::path& dir, const optimus::GptConfig& config,
                          const std::map<std::string, GlobalMatrix>& saved, const optimus::GptConfig& other,
                          const std::string& refusal) {
  optimus::test::run_in_process(1, [&](optimus::Communicator& w) {
    const optimus::Grid grid = optimus::Grid::create(w, 1);
    optimus::Gpt2D<float> model(grid, config);
    optimus::AdamW<float> optimizer(grid, model.parameters(), {.config = optimus::AdamWConfig{.lr = 3e-3}});
    optimus::checkpoint::load(dir / "step_1", model, &optimizer, nullptr);
    check_same_state(gather_state(model, optimizer, grid.grid(), grid.device()), saved);
    optimus::Gpt2D<float> wrong(grid, other);
    CHECK_THROWS_WITH_AS(
        optimus::checkpoint::load(dir / "step_1", wrong, static_cast<optimus::AdamW<float>*>(nullptr), nullptr),
        doctest::Contains(refusal.c_str()), optimus::Error);
  });
}

}  // namespace

TEST_CASE("a model of RMSNorm blocks without biases: its checkpoint records the block, reloads bitwise at q = 1, is "
          "refused by GPT-2's blocks, and GPT-2's formats refuse it") {
  const fs::path dir = fresh_directory("rmsnorm");
  optimus::GptConfig rms = small_config();
  rms.block.norm = {.kind = optimus::NormSpec::Kind::rmsnorm, .eps = 1e-6};
  rms.block.bias = false;
  std::vector<std::string> refusals;
  const std::map<std::string, GlobalMatrix> saved = save_trying_gpt2_export(dir, rms, refusals);
  CHECK(saved.count("h.0.ln_1.weight") == 1);
  CHECK(saved.count("h.0.ln_1.bias") == 0);  // RMSNorm has no bias
  CHECK(saved.count("h.0.attn.c_attn.weight") == 1);
  CHECK(saved.count("h.0.attn.c_attn.bias") == 0);
  CHECK(saved.count("h.1.mlp.c_proj.bias") == 0);
  for (const std::string& m : refusals) {
    CHECK(m.find("export_hf: the file holds GPT-2's blocks (LayerNorm, eps 1e-5); the model's are RMSNorm") !=
          std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir / "gpt2.safetensors"));
  reloads_at_q1_not_as(dir, rms, saved, small_config(), "is of another model: norm rmsnorm there, layernorm here");
  fs::remove_all(dir);
}

TEST_CASE("BERT's model (exact GELU, norms after the residual adds, bidirectional attention, token types, a norm over "
          "the embeddings, the masked-LM head): the checkpoint records it, reloads bitwise at q = 1, is refused by "
          "pre-norm and by causal blocks, without token types, the embeddings' norm or the head, and by GPT-2's file "
          "format, each naming what differs") {
  const fs::path dir = fresh_directory("gelu_erf");
  optimus::GptConfig erf = small_config();
  erf.block.mlp = optimus::MlpKind::gelu_erf;
  erf.block.post_norm = true;
  erf.block.bidirectional = true;
  erf.block.token_types = 3;  // at q = 2 stored in 4 rows, the last one padding
  erf.block.embedding_norm = true;
  erf.block.head_transform = true;  // head.bias: stored over q = 2's padded vocabulary, reloaded over q = 1's
  std::vector<std::string> refusals;
  const std::map<std::string, GlobalMatrix> saved = save_trying_gpt2_export(dir, erf, refusals);
  REQUIRE(saved.count("tte") == 1);
  CHECK(saved.at("tte").rows() == 3);
  CHECK(saved.at("tte").cols() == erf.hidden);
  CHECK(saved.count("ln_e.weight") == 1);
  CHECK(saved.count("ln_e.bias") == 1);
  CHECK(saved.count("head.dense.weight") == 1);
  REQUIRE(saved.count("head.bias") == 1);
  CHECK(saved.at("head.bias").size() == erf.vocab);
  CHECK(saved.at("head.bias").cwiseAbs().maxCoeff() > 0);  // trained: not the initial zeros
  for (const std::string& m : refusals) {
    CHECK(m.find("the model's are LayerNorm with eps 1e-05, MLP gelu_erf, norms after the residual adds, bidirectional "
                 "attention, token-type embeddings, a norm over the embeddings, a masked-LM head") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir / "gpt2.safetensors"));
  optimus::GptConfig pre_norm = erf;
  pre_norm.block.post_norm = false;
  reloads_at_q1_not_as(dir, erf, saved, pre_norm, "is of another model: post-norm 1 there, 0 here");
  optimus::GptConfig causal = erf;
  causal.block.bidirectional = false;
  reloads_at_q1_not_as(dir, erf, saved, causal, "is of another model: bidirectional attention 1 there, 0 here");
  optimus::GptConfig two_types = erf;
  two_types.block.token_types = 2;
  reloads_at_q1_not_as(dir, erf, saved, two_types, "is of another model: token types 3 there, 2 here");
  optimus::GptConfig no_norm = erf;
  no_norm.block.embedding_norm = false;
  reloads_at_q1_not_as(dir, erf, saved, no_norm, "is of another model: embedding norm 1 there, 0 here");
  optimus::GptConfig no_head = erf;
  no_head.block.head_transform = false;
  reloads_at_q1_not_as(dir, erf, saved, no_head, "is of another model: masked-LM head transform 1 there, 0 here");
  fs::remove_all(dir);
}

TEST_CASE("a Llama checkpoint (RoPE positions, SwiGLU, GQA, untied head) saved on a 2x2 grid reloads bitwise on q = 1 "
          "and on the 1D baseline, its fused columns resharded") {
  const fs::path dir = fresh_directory("llama");
  optimus::GptConfig llama = small_config();
  llama.heads = 6;                                   // heads of 6: rotary positions pair a head's columns
  llama.block = optimus::BlockConfig::llama(500, 2);  // 2 key/value heads: one per grid column, one per 1D rank
  const std::map<std::string, GlobalMatrix> saved =
      train_and_save_on_2x2(dir, llama, [](optimus::Gpt2D<float>&, int) {});
  CHECK(saved.count("wpe") == 0);  // rotary positions: no table
  CHECK(saved.count("lm_head.weight") == 1);
  CHECK(saved.at("h.0.attn.c_attn.weight").cols() == 36 + 2 * 2 * 6);  // [Q | K | V] of 6 and 2 heads of 6
  CHECK(saved.at("h.0.mlp.c_fc.weight").cols() == 2 * 72);             // [gate | up]
  optimus::GptConfig tied = llama;
  tied.block.tied_head = true;
  reloads_at_q1_not_as(dir, llama, saved, tied, "is of another model: tied head 0 there, 1 here");
  std::map<std::string, GlobalMatrix> one_d;
  optimus::test::run_in_process(2, [&](optimus::Communicator& w) {
    const optimus::megatron::Group group(w);
    optimus::Gpt1D<float> model(group, llama);
    optimus::AdamW<float> optimizer(group, model.parameters(), {.config = optimus::AdamWConfig{.lr = 3e-3}});
    optimus::checkpoint::load(dir / "step_1", model, &optimizer, nullptr);
    auto state = gather_state(model, optimizer, group.tp(), group.local().device());
    if (w.rank() == 0) one_d = std::move(state);
  });
  check_same_state(one_d, saved);
  fs::remove_all(dir);
}

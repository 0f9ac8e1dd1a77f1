// Layer and model checks against the reference, shared by the MPI and in-process suites: Linear2D, the block, the
// embedding, the LM head, GPTs of any blocks, training, parameters and errors (a block's parts: block_part_cases.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "capture_binding.hpp"
#include "in_flight.hpp"
#include "layer_case_support.hpp"
#include "layer_cases.hpp"
#include "optimus/core/element_math.hpp"
#include "optimus/model/gpt.hpp"
#include "optimus/reference/gpt.hpp"
#include "optimus/reference/matmul.hpp"
#include "same_error.hpp"

namespace optimus::test {
namespace {

template <class T>
void linear_case(const Grid& grid, const LayerShapes& s, const InFlight& f) {
  const std::int64_t n = s.batch * s.seq, in = s.hidden, out = s.ffn;
  Linear2D<T> layer(grid, "lin", in, out);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 100, grid.device());
  const auto x = [&](int c) { return input<T>(n, in, 1, c); };
  const auto dy = [&](int c) { return input<T>(n, out, 2, c); };
  LayerRun<typename Linear2D<T>::Context> run{
      .forward = [&](int c, auto& saved) {
        return global(layer.forward(DistMatrix<T>::from_global(grid, x(c)), pass_for(0, c), saved));
      },
      .backward = distributed_backward<T>(grid, layer, dy),
      .expected = [&](int c) {
        const reference::LinearGrads g = reference::linear_backward(x(c), p.at("lin.weight"), dy(c));
        return Expected{.output = reference::linear_forward(x(c), p.at("lin.weight"), p.at("lin.bias")),
                        .input_grad = g.dx,
                        .grads = {{"lin.weight", g.dw}, {"lin.bias", g.db}}};
      },
  };
  run_in_flight(f, run, grid.memory(), tolerance<T>(grid.gemm_math()), names_of(refs), gradients_of(grid, refs));
}


// How a block case runs: its sequences padded as padded_lengths says (the attention's key-padding mask) or not, and
// the block's recomputation policy.
struct BlockRun {
  bool padded = false;
  Recompute recompute = Recompute::none;
};

template <class T>
void block_case(const Grid& grid, const LayerShapes& s, double dropout, const BlockConfig& block, const BlockRun& how,
                const InFlight& f) {
  const bool padded = how.padded;
  const std::int64_t n = s.batch * s.seq, h = s.hidden;
  GptConfig config = config_for(grid.q(), 1, dropout);
  config.block = block;
  TransformerBlock2D<T> layer(grid, config, 0);
  layer.set_recompute(how.recompute);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 500, grid.device());
  const reference::BlockWeights w = reference::block_weights(p, 0, block);
  const auto x = [&](int c) { return input<T>(n, h, 9, c); };
  const auto dy = [&](int c) { return input<T>(n, h, 10, c); };
  LayerRun<typename TransformerBlock2D<T>::Context> run{
      .forward = [&](int c, auto& saved) {
        return global(layer.forward(DistMatrix<T>::from_global(grid, x(c)), s.seq, pass_for(4, c, s, padded), saved));
      },
      .backward = distributed_backward<T>(grid, layer, dy),
      .expected = [&](int c) {
        const reference::Dropout rd{dropout, config.seed, pass_for(4, c).step, 0};
        reference::BlockCache cache;
        const Matrix y =
            reference::block_forward(x(c), w, s.batch, s.heads, pass_for(4, c, s, padded).lengths, rd, cache);
        const reference::BlockGrads g = reference::block_backward(cache, w, s.batch, s.heads, rd, dy(c));
        Expected e{.output = y, .input_grad = g.dx, .grads = {}};
        reference::store_block_grads(e.grads, 0, g.dw);
        return e;
      },
  };
  run_in_flight(f, run, grid.memory(), tolerance<T>(grid.gemm_math()), names_of(refs), gradients_of(grid, refs));
}

template <class T>
void embedding_case(const Grid& grid, const LayerShapes& s, const InFlight& f) {
  const GptConfig config = config_for(grid.q(), 1, 0.2);
  const std::int64_t n = s.batch * s.seq;
  Embedding2D<T> layer(grid, config, TiedHead::elsewhere);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 600, grid.device());
  const auto tokens = [&](int c) { return random_tokens(n, config.vocab, 21 + 1000 * static_cast<std::uint64_t>(c)); };
  const auto mask = [&](int c) {
    return reference::dropout_mask(n, s.hidden, config.dropout, config.seed,
                                   dropout_stream(pass_for(5, c).step, 0, DropoutSite::embedding));
  };
  const auto dx = [&](int c) { return input<T>(n, s.hidden, 22, c); };
  LayerRun<typename Embedding2D<T>::Context> run{
      .forward = [&](int c, auto& saved) { return global(layer.forward(tokens(c), s.batch, pass_for(5, c), saved)); },
      .backward = [&](int c, auto saved) {
        layer.backward(std::move(saved), DistMatrix<T>::from_global(grid, dx(c)));
        return Matrix();
      },
      .expected = [&](int c) {
        const reference::EmbeddingGrads g =
            reference::embedding_backward(config.vocab, config.max_seq, tokens(c), s.batch, mask(c), dx(c));
        return Expected{.output = reference::embedding_forward(p.at("wte"), p.at("wpe"), tokens(c), s.batch, mask(c)),
                        .input_grad = Matrix(),
                        .grads = {{"wte", g.dwte}, {"wpe", g.dwpe}}};
      },
      .saves_tracked = false,  // the token ids, on the host
  };
  run_in_flight(f, run, grid.memory(), tolerance<T>(grid.gemm_math()), names_of(refs), gradients_of(grid, refs));
}

// Which positions the head predicts: all (a causal LM's), or a third of them (a masked LM's: the others' targets are
// math::kIgnoredTarget, the loss a mean over the predicted); padded: the same on sequences padded as padded_lengths
// says (an encoder's batch), whose padding is never predicted.
enum class Predicted { all, some, padded };

// n random target ids from `seed` for context c; under Predicted::some (and padded) those at positions i with
// (i + c) % 3 != 0 become math::kIgnoredTarget, and under padded those of each sequence's padding (sequences of s).
std::vector<int> targets_for(std::int64_t n, std::int64_t vocab, std::uint64_t seed, int c, Predicted predicted,
                             std::int64_t s) {
  std::vector<int> t = random_tokens(n, vocab, seed + 1000 * static_cast<std::uint64_t>(c));
  const std::vector<int> lengths = padded_lengths(n / s, s);
  for (std::int64_t i = 0; i < n && predicted != Predicted::all; ++i) {
    const bool padding = predicted == Predicted::padded && i % s >= lengths[static_cast<std::size_t>(i / s)];
    if ((i + c) % 3 != 0 || padding) t[static_cast<std::size_t>(i)] = math::kIgnoredTarget;
  }
  return t;
}



template <class T>
void lm_head_case(const Grid& grid, const LayerShapes& s, Predicted predicted, const InFlight& f) {
  const std::int64_t n = s.batch * s.seq;
  const Matrix wte = rounded<T>(random(s.vocab, s.hidden, 32, 2.0));
  const auto x = [&](int c) { return input<T>(n, s.hidden, 31, c); };
  const auto targets = [&](int c) { return targets_for(n, s.vocab, 33, c, predicted, s.seq); };
  const auto mean_over = [&](int c) {
    const std::vector<int> t = targets(c);
    return static_cast<std::int64_t>(std::count_if(t.begin(), t.end(), [](int id) { return id >= 0; }));
  };
  const auto ce = [&](int c) { return reference::cross_entropy(x(c) * wte.transpose(), targets(c)); };
  // wte stored with padding ids [vocab, padded) as zero rows (GptConfig::stored_vocab): everything must equal the
  // reference on the unpadded vocabulary, and the padding rows' gradients stay zero.
  const std::int64_t padded = s.vocab + 2 * grid.q();
  Matrix stored = Matrix::Zero(padded, s.hidden);
  stored.topRows(s.vocab) = wte;
  const auto W = DistMatrix<T>::from_global(grid, stored);
  DistMatrix<T> dwte(grid, padded, s.hidden);
  LmHead2D<T> head(grid, s.vocab);
  LayerRun<typename LmHead2D<T>::Context> run{
      .forward = [&](int c, auto& saved) {
        return Matrix::Constant(1, 1, head.forward(DistMatrix<T>::from_global(grid, x(c)), W, targets(c),
                                                   mean_over(c), pass_for(0, c), saved));
      },
      .backward = [&](int, auto saved) { return global(head.backward(std::move(saved), W, dwte)); },
      .expected = [&](int c) {
        const reference::CrossEntropy e = ce(c);
        return Expected{.output = Matrix::Constant(1, 1, e.loss),
                        .input_grad = e.dlogits * wte,
                        .grads = {{"wte", e.dlogits.transpose() * x(c)}}};
      },
  };
  run_in_flight(f, run, grid.memory(), tolerance<T>(grid.gemm_math()), {"wte"}, [&](const std::string&) {
    const Matrix g = global(dwte);
    CHECK(g.bottomRows(padded - s.vocab).isZero(0));  // padding rows get no gradient
    return Matrix(g.topRows(s.vocab));
  });
  const Matrix logits = global(head.logits(DistMatrix<T>::from_global(grid, x(0)), W));
  expect_close<T>(grid, "logits", logits.leftCols(s.vocab), x(0) * wte.transpose());
  CHECK((logits.rightCols(padded - s.vocab).array() == -std::numeric_limits<double>::infinity()).all());
}

// A 2-block GPT of `block`'s blocks (GPT-2's, or another composition) against the reference, predicting every position
// or a third of them (a masked LM's loss: a mean over those).
template <class T>
void gpt_case(const Grid& grid, const LayerShapes& s, double dropout, const BlockConfig& block, Predicted predicted,
              const InFlight& f) {
  GptConfig config = config_for(grid.q(), 2, dropout);
  config.block = block;
  if (block.rope && config.head_size() % 2 != 0) config.heads /= 2;  // rotary positions pair a head's columns
  Gpt2D<T> model(grid, config);
  // Start from the shared initialization rule, rounded to T, as the reference sees it.
  reference::Parameters p = reference::gpt_init(config);
  if (block.embedding_norm) {  // ln_e with a gamma and beta of their own (initialized as 1 and 0), loaded
    const std::map<std::string, GlobalMatrix> ln_e{{"ln_e.weight", reference::random_matrix(1, config.hidden, 71)},
                                                   {"ln_e.bias", reference::random_matrix(1, config.hidden, 72)}};
    for (const auto& [name, m] : ln_e) p[name] = m;
    model.load_global(ln_e);  // (rounded to T there, as p is below)
  }
  if (block.head_transform) {  // the head's bias (initialized as 0), loaded
    const std::map<std::string, GlobalMatrix> bias{{"head.bias", reference::random_matrix(1, config.vocab, 73)}};
    p["head.bias"] = bias.at("head.bias");
    model.load_global(bias);
  }
  for (auto& [name, m] : p) m = rounded<T>(m);
  const std::int64_t n = s.batch * s.seq;
  const auto tokens = [&](int c) { return random_tokens(n, config.vocab, 1 + 1000 * static_cast<std::uint64_t>(c)); };
  const auto targets = [&](int c) { return targets_for(n, config.vocab, 2, c, predicted, s.seq); };
  const EncoderInputs inputs = encoder_inputs(s, predicted == Predicted::padded, block);
  const std::vector<ParameterRef<T>> refs = model.parameters();
  LayerRun<typename Gpt2D<T>::Context> run{
      .forward = [&](int c, auto& saved) {
        return Matrix::Constant(1, 1,
                                model.forward(tokens(c), targets(c), inputs, s.batch, pass_for(3, c).step, saved));
      },
      .backward = [&](int, auto saved) {
        model.backward(std::move(saved));
        return Matrix();
      },
      .expected = [&](int c) {
        reference::GptResult r = reference::gpt_forward_backward(config, p, tokens(c), targets(c), inputs,
                                                                 s.batch, pass_for(3, c).step);
        return Expected{.output = Matrix::Constant(1, 1, r.loss), .input_grad = Matrix(), .grads = std::move(r.grads)};
      },
  };
  run_in_flight(f, run, grid.memory(), tolerance<T>(grid.gemm_math()), names_of(refs), gradients_of(grid, refs));
  const Matrix stored_logits = global(*model.logits(tokens(0), inputs, s.batch));  // [N, stored vocabulary]
  REQUIRE(stored_logits.cols() == config.stored_vocab(grid.q()));
  CHECK((stored_logits.rightCols(stored_logits.cols() - config.vocab).array() ==
         -std::numeric_limits<double>::infinity()).all());  // padding ids: no probability
  const Matrix logits = stored_logits.leftCols(config.vocab);
  const reference::GptResult no_dropout = [&] {
    GptConfig c = config;
    c.dropout = 0;
    return reference::gpt_forward_backward(c, p, tokens(0), targets(0), inputs, s.batch, 0);
  }();
  const Matrix& expected_logits = no_dropout.logits;
  expect_close<T>(grid, "gpt logits", logits, expected_logits);
  const double evaluated = model.evaluate(tokens(0), targets(0), inputs, s.batch);
  CHECK(std::abs(evaluated - no_dropout.loss) <= tolerance<T>(grid.gemm_math()) * no_dropout.loss);
  if (sizeof(T) == 4 && grid.gemm_math() == ops::GemmMath::bf16) {  // bf16 operands really were used
    CHECK_FALSE(reference::compare_relative(logits, expected_logits, 1e-5).ok());
  }
}

template <class T>
void gpt_case(const Grid& grid, const LayerShapes& s, double dropout, const BlockConfig& block, const InFlight& f) {
  gpt_case<T>(grid, s, dropout, block, Predicted::all, f);
}



}  // namespace

// n token ids in [0, vocab) drawn from `seed`, the same on every rank.
std::vector<int> random_tokens(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  std::vector<int> t(static_cast<std::size_t>(n));
  const CounterRng rng(seed);
  for (std::int64_t e = 0; e < n; ++e) t[static_cast<std::size_t>(e)] = static_cast<int>(rng.uniform(0, static_cast<std::uint64_t>(e)) * static_cast<double>(vocab));
  return t;
}

LayerShapes shapes_for(int q) {
  if (q <= 3) return {6, 5, 36, 12, 72, 30, 12};  // h, ffn: multiples of 4 and 9
  return {8, 5, 48, 12, 96, 32, 12};              // q = 4: multiples of 16
}

GptConfig config_for(int q, std::int64_t layers, double dropout) {
  const LayerShapes s = shapes_for(q);
  GptConfig c;
  c.vocab = s.vocab;
  c.max_seq = s.max_seq;
  c.layers = layers;
  c.hidden = s.hidden;
  c.heads = s.heads;
  c.ffn = s.ffn;
  c.dropout = dropout;
  c.seed = 2024;
  return c;
}

void check_linear(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  in_flight_scenarios<double>([&](const InFlight& f) { linear_case<double>(grid, shapes_for(q), f); });
  in_flight_scenarios<float>([&](const InFlight& f) { linear_case<float>(grid, shapes_for(q), f); });
}

void check_block(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  for (const BlockConfig& block : {BlockConfig{}, post_norm_blocks(), bert_blocks()}) {
    CAPTURE(block.post_norm);
    CAPTURE(block.bidirectional);
    block_case<double>(grid, shapes_for(q), 0.0, block, BlockRun{}, InFlight{});
    block_case<float>(grid, shapes_for(q), 0.0, block, BlockRun{}, InFlight{});
  }
  // With dropout, in every in-flight scenario: GPT-2's blocks, and BERT's (post-norm, bidirectional) in f64; BERT's in
  // f32 on padded sequences below.
  in_flight_scenarios<double>([&](const InFlight& f) { block_case<double>(grid, shapes_for(q), 0.1, BlockConfig{}, BlockRun{}, f); });
  in_flight_scenarios<float>([&](const InFlight& f) { block_case<float>(grid, shapes_for(q), 0.1, BlockConfig{}, BlockRun{}, f); });
  in_flight_scenarios<double>([&](const InFlight& f) { block_case<double>(grid, shapes_for(q), 0.1, bert_blocks(), BlockRun{}, f); });
  // BERT's blocks on padded sequences, under each recomputation policy (which reruns the attention in backward, with
  // the lengths its context kept).
  for (const Recompute policy : {Recompute::none, Recompute::selective, Recompute::full}) {
    block_case<double>(grid, shapes_for(q), 0.1, bert_blocks(), BlockRun{.padded = true, .recompute = policy},
                       InFlight{});
  }
  const BlockRun full{.padded = true, .recompute = Recompute::full};
  in_flight_scenarios<float>([&](const InFlight& f) { block_case<float>(grid, shapes_for(q), 0.1, bert_blocks(), full, f); });
}

void check_embedding(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  in_flight_scenarios<double>([&](const InFlight& f) { embedding_case<double>(grid, shapes_for(q), f); });
  in_flight_scenarios<float>([&](const InFlight& f) { embedding_case<float>(grid, shapes_for(q), f); });
}

void check_lm_head(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  for (const Predicted predicted : {Predicted::all, Predicted::some}) {
    CAPTURE(predicted == Predicted::all);
    in_flight_scenarios<double>([&](const InFlight& f) { lm_head_case<double>(grid, shapes_for(q), predicted, f); });
    in_flight_scenarios<float>([&](const InFlight& f) { lm_head_case<float>(grid, shapes_for(q), predicted, f); });
  }
}

void check_gpt(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  in_flight_scenarios<double>([&](const InFlight& f) { gpt_case<double>(grid, shapes_for(q), 0.1, BlockConfig{}, f); });
  gpt_case<float>(grid, shapes_for(q), 0.0, BlockConfig{}, InFlight{});
  // Compositions no class was written for: RMSNorm blocks with GPT-2's other parts, and RMSNorm blocks without biases.
  gpt_case<double>(grid, shapes_for(q), 0.1, rms_blocks(true), InFlight{});
  gpt_case<double>(grid, shapes_for(q), 0.1, rms_blocks(false), InFlight{});
  gpt_case<float>(grid, shapes_for(q), 0.0, rms_blocks(false), InFlight{});
  // Llama's blocks, and Llama's with GPT-2's tied head and learned positions.
  gpt_case<double>(grid, shapes_for(q), 0.1, llama_blocks(q), InFlight{});
  gpt_case<float>(grid, shapes_for(q), 0.0, llama_blocks(q), InFlight{});
  BlockConfig mixed = llama_blocks(q);
  mixed.rope.reset();
  mixed.tied_head = true;
  gpt_case<double>(grid, shapes_for(q), 0.1, mixed, InFlight{});
  // BERT's blocks (post-norm, the exact GELU, bidirectional) with a masked LM's loss: a third of the positions
  // predicted, the mean over those (the blocks' parts one at a time are check_block's and the MLP's cases).
  gpt_case<double>(grid, shapes_for(q), 0.1, bert_blocks(), Predicted::some, InFlight{});
  gpt_case<float>(grid, shapes_for(q), 0.0, bert_blocks(), Predicted::some, InFlight{});
  // BERT's model on an encoder's batch: its sequences padded (the padding never predicted), token types (each
  // sequence's second half of type 1), the embeddings' norm and the masked-LM head.
  in_flight_scenarios<double>(
      [&](const InFlight& f) { gpt_case<double>(grid, shapes_for(q), 0.1, bert_model_blocks(), Predicted::padded, f); });
  gpt_case<float>(grid, shapes_for(q), 0.0, bert_model_blocks(), Predicted::padded, InFlight{});
}

namespace {

// The loss after 5 AdamW steps (the optimizer on T master weights and state) against the reference's; returns it.
template <class T>
double training_case(const Grid& grid, int dp) {
  const int q = grid.q();
  const GptConfig config = config_for(q, 2, 0.1);
  const LayerShapes s = shapes_for(q);
  const std::int64_t global_batch = s.batch * dp, n = global_batch * s.seq, mine = s.batch * s.seq;
  const std::vector<int> tokens = random_tokens(n, config.vocab, 11), targets = random_tokens(n, config.vocab, 12);
  const auto slice = [&](const std::vector<int>& all) {
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(grid.dp_index() * mine);
    return std::vector<int>(first, first + static_cast<std::ptrdiff_t>(mine));
  };
  const AdamWConfig adam{3e-3, 0.9, 0.95, 1e-8, 0.1, 1.0};
  Gpt2D<T> model(grid, config);
  AdamW<T> optimizer(grid, model.parameters(), {.config = adam});
  reference::Parameters p = reference::gpt_init(config), m, v;
  double loss = 0;
  for (int step = 1; step <= 6; ++step) {
    model.zero_grad();
    typename Gpt2D<T>::Context saved;
    loss = model.forward(slice(tokens), slice(targets), s.batch, static_cast<std::uint64_t>(step), saved);
    const reference::GptResult r = reference::gpt_forward_backward(config, p, tokens, targets, global_batch,
                                                                   static_cast<std::uint64_t>(step));
    CAPTURE(step);
    CHECK(std::abs(loss - r.loss) <= tolerance<T>(grid.gemm_math()) * std::abs(r.loss));
    if (step == 6) break;  // the loss after 5 steps
    model.backward(std::move(saved));
    const double norm = optimizer.step();
    const double ref_norm = reference::adamw_step(adam, step, p, r.grads, m, v);
    // With bf16 GEMMs the two trajectories drift apart (Adam divides small gradient differences by small second
    // moments): the gradient norm is compared where the parameters are still the same, the loss at every step.
    if (step == 1 || grid.gemm_math() != ops::GemmMath::bf16) {
      CHECK(std::abs(norm - ref_norm) <= tolerance<T>(grid.gemm_math()) * ref_norm);
    }
  }
  return loss;
}

}  // namespace

double check_training(Communicator& world, int q, int dp) {
  const Grid grid = Grid::create(world, q);
  REQUIRE(grid.dp() == dp);
  return training_case<double>(grid, dp);
}

void check_f32_layers_on(const Grid& grid) {
  const LayerShapes s = shapes_for(grid.q());
  in_flight_scenarios<float>([&](const InFlight& f) {
    linear_case<float>(grid, s, f);
    norm_case<float>(grid, s, kLayerNorm, f);
    norm_case<float>(grid, s, kRmsNorm, f);
    attention_case<float>(grid, s, 0.2, AttentionVariant{}, f);
    attention_case<float>(grid, s, 0.2, bidirectional_attention(), f);
    attention_case<float>(grid, s, 0.2, padded_attention(false), f);
    // Llama's: rotary positions, no biases, grouped-query attention; SwiGLU.
    attention_case<float>(grid, s, 0.2,
                          AttentionVariant{.rope = RopeSpec{.theta = 500}, .bias = false,
                                           .kv_heads = [q = grid.q()](std::int64_t heads) {
                                             return (heads / 2) % q == 0 ? heads / 2 : std::int64_t{q};
                                           }},
                          f);
    mlp_case<float>(grid, s, MlpKind::gelu, true, f);
    mlp_case<float>(grid, s, MlpKind::gelu_erf, true, f);
    mlp_case<float>(grid, s, MlpKind::swiglu, false, f);
    block_case<float>(grid, s, 0.1, BlockConfig{}, BlockRun{}, f);
    // BERT's blocks (post-norm, bidirectional) on padded sequences, recomputed.
    block_case<float>(grid, s, 0.1, bert_blocks(), BlockRun{.padded = true, .recompute = Recompute::full}, f);
    embedding_case<float>(grid, s, f);
    lm_head_case<float>(grid, s, Predicted::all, f);
    lm_head_case<float>(grid, s, Predicted::some, f);
    gpt_case<float>(grid, s, 0.1, BlockConfig{}, f);  // (other blocks' parts: norm_case, attention_case above)
  });
}

void check_f32_training_on(const Grid& grid) {
  const double loss = training_case<float>(grid, grid.dp());
  CHECK(std::isfinite(loss));
}

void check_mixed_precision(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q).with({.gemm_math = ops::GemmMath::bf16});
  check_f32_layers_on(grid);
  gpt_case<double>(grid, shapes_for(q), 0.1, BlockConfig{}, InFlight{});  // f64 layers ignore the GEMM math: still 1e-10
  training_case<float>(grid, grid.dp());  // f32 master weights and AdamW state, bf16 GEMMs
}

void check_parameters(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  // GptConfig::parameter_count follows the blocks: RMSNorm's gamma only, no linear biases; Llama's: no wpe, SwiGLU's
  // three matrices, GQA's smaller K and V, the untied head's lm_head.
  for (const BlockConfig& block : {rms_blocks(true), rms_blocks(false), llama_blocks(q)}) {
    GptConfig c = config_for(q, 2, 0.0);
    c.block = block;
    if (block.rope && c.head_size() % 2 != 0) c.heads /= 2;  // an even head size
    Gpt2D<double> other(grid, c);
    double elements = 0;
    for (const ParameterRef<double>& p : other.parameters()) {
      elements += static_cast<double>(p.value.numel());
    }
    CHECK(grid.grid().all_reduce(elements, ReduceOp::sum) ==
          static_cast<double>(c.parameter_count() +
                              (c.stored_vocab(q) - c.vocab) * c.hidden * (c.block.tied_head ? 1 : 2)));
  }
  const GptConfig config = config_for(q, 2, 0.0);
  Gpt2D<double> model(grid, config);
  // Every element is stored exactly once in the grid, plus wte's padding rows (stored_vocab - vocab of them).
  double stored = 0;
  for (const ParameterRef<double>& p : model.parameters()) stored += static_cast<double>(p.value.numel());
  const std::int64_t padding = config.stored_vocab(q) - config.vocab;
  CHECK(padding > 0);
  CHECK(grid.grid().all_reduce(stored, ReduceOp::sum) ==
        static_cast<double>(config.parameter_count() + padding * config.hidden));
  CHECK(grid.memory().current(MemoryKind::parameters) == static_cast<std::uint64_t>(stored) * sizeof(double));
  // Load distinct values everywhere, gather them back unchanged (c_attn's columns included).
  std::map<std::string, GlobalMatrix> tensors;
  std::uint64_t seed = 900;
  for (const auto& [name, shape] : reference::gpt_parameter_shapes(config)) {
    tensors[name] = reference::random_matrix(shape.size() == 2 ? shape[0] : 1, shape.back(), seed++);
  }
  model.load_global(tensors);
  const std::map<std::string, GlobalMatrix> back = model.gather(false);
  CHECK(back.size() == tensors.size());
  for (const auto& [name, full] : tensors) {
    CAPTURE_BINDING(name);
    CHECK(back.at(name) == full);
  }
  // Vectors may also come as n x 1.
  model.load_global({{"ln_f.bias", GlobalMatrix(tensors.at("ln_f.bias").transpose())}});
  CHECK(model.gather(false).at("ln_f.bias") == tensors.at("ln_f.bias"));
}

void check_layer_errors(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  auto message = [&](const std::function<void()>& fn) { return error_on_every_rank(grid.grid(), fn); };
  const GptConfig good = config_for(q, 1, 0.0);
  Gpt2D<double> model(grid, good);
  const LayerShapes s = shapes_for(q);
  const std::vector<int> tokens(static_cast<std::size_t>(s.batch * s.seq), 1);

  auto with = [&](auto change) {
    GptConfig c = good;
    change(c);
    return message([&] { Gpt2D<double> bad(grid, c); });
  };
  if (q > 1) {
    CHECK(with([&](GptConfig& c) { c.heads = q + 1; c.hidden = (q + 1) * q * q; }).find("heads = " + std::to_string(q + 1) + " is not divisible by q") != std::string::npos);
    // Any vocabulary fits (it is padded); an explicit padding must be a multiple of q no smaller than it.
    CHECK(with([&](GptConfig& c) { c.padded_vocab = s.vocab + 1; }).find("padded_vocab = " + std::to_string(s.vocab + 1)) != std::string::npos);
    CHECK(with([&](GptConfig& c) { c.padded_vocab = s.vocab - q; }).find("no smaller than vocab") != std::string::npos);
    CHECK(with([&](GptConfig& c) { c.ffn = s.ffn + q; }).find("ffn = " + std::to_string(s.ffn + q)) != std::string::npos);
    const std::vector<int> odd(static_cast<std::size_t>((s.batch + 1) * s.seq), 1);
    CHECK(message([&] { model.train_step(odd, odd, s.batch + 1, 1); }) ==
          "Gpt2D::train_step: a micro-batch of " + std::to_string(s.batch + 1) + " sequences is not divisible by q = " +
              std::to_string(q));
  }
  const std::vector<int> too_long(static_cast<std::size_t>(s.batch * (s.max_seq + 1)), 1);
  CHECK(message([&] { model.train_step(too_long, too_long, s.batch, 1); }).find("exceeds the position table") !=
        std::string::npos);
  std::vector<int> bad_token = tokens;
  bad_token[3] = static_cast<int>(s.vocab);
  CHECK(message([&] { model.train_step(bad_token, tokens, s.batch, 1); }) ==
        "embedding: token id " + std::to_string(s.vocab) + " at position 3 is outside the vocabulary [0, " +
            std::to_string(s.vocab) + ")");
  CHECK(message([&] { model.train_step(tokens, bad_token, s.batch, 1); }).find("target id") != std::string::npos);
  CHECK(message([&] { model.load_global({{"h.0.attn.c_proj.weight", GlobalMatrix::Zero(s.hidden, s.hidden + 1)}}); })
            .find("is " + std::to_string(s.hidden) + "x" + std::to_string(s.hidden)) != std::string::npos);
  CHECK(message([&] { model.load_global({{"h.7.attn.bias", GlobalMatrix::Zero(1, 1)}}); }) ==
        "load_global: unknown parameter 'h.7.attn.bias'");
  // Tensors other blocks have: GPT-2's model has no lm_head, a Llama model no wpe and no ln_f.bias.
  CHECK(message([&] { model.load_global({{"lm_head.weight", GlobalMatrix::Zero(s.vocab, s.hidden)}}); }) ==
        "load_global: unknown parameter 'lm_head.weight'");
  GptConfig llama = config_for(q, 2, 0.0);
  llama.block = llama_blocks(q);
  if (llama.head_size() % 2 != 0) llama.heads /= 2;
  Gpt2D<double> llama_model(grid, llama);
  for (const char* name : {"wpe", "ln_f.bias"}) {
    CHECK(message([&] { llama_model.load_global({{name, GlobalMatrix::Zero(1, 1)}}); }) ==
          std::string("load_global: unknown parameter '") + name + "'");
  }
}

}  // namespace optimus::test

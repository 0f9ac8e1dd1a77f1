// Layer and model checks against the reference, shared by the MPI and in-process suites.
#include "layer_cases.hpp"

#include "same_error.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "optimus/layers/gpt.hpp"
#include "optimus/reference/gpt.hpp"
#include "optimus/reference/matmul.hpp"

namespace optimus::test {
namespace {

using reference::Matrix;


Matrix random(std::int64_t rows, std::int64_t cols, std::uint64_t seed, double scale = 1.0) {
  return scale * reference::random_matrix(rows, cols, seed);
}

template <class T>
void expect_close(const Grid& grid, const char* what, const Matrix& got, const Matrix& expected) {
  const auto cmp = reference::compare_relative(got, expected, tolerance<T>(grid.gemm_math()));
  const std::string name = what;
  CAPTURE(name);
  CAPTURE(cmp);
  CAPTURE(sizeof(T));
  CHECK(cmp.ok());
}

template <class T>
Matrix global(const DistMatrix<T>& m) {
  return m.to_global().template cast<double>();
}

template <class T>
void expect_grads(const Grid& grid, const std::vector<ParameterRef<T>>& refs, const reference::Parameters& expected) {
  for (const ParameterRef<T>& r : refs) {
    CAPTURE(r.name);
    const Matrix got = gather_parameter(grid.grid(), r, true, grid.device());
    expect_close<T>(grid, "parameter gradient", got, expected.at(r.name));
  }
}

reference::AttentionWeights attention_weights(const reference::Parameters& p, const std::string& prefix) {
  return {p.at(prefix + ".c_attn.weight"), p.at(prefix + ".c_attn.bias"), p.at(prefix + ".c_proj.weight"),
          p.at(prefix + ".c_proj.bias")};
}
reference::MlpWeights mlp_weights(const reference::Parameters& p, const std::string& prefix) {
  return {p.at(prefix + ".c_fc.weight"), p.at(prefix + ".c_fc.bias"), p.at(prefix + ".c_proj.weight"),
          p.at(prefix + ".c_proj.bias")};
}
void put_attention(reference::Parameters& g, const std::string& prefix, const reference::AttentionWeights& w) {
  g[prefix + ".c_attn.weight"] = w.c_attn_w;
  g[prefix + ".c_attn.bias"] = w.c_attn_b;
  g[prefix + ".c_proj.weight"] = w.c_proj_w;
  g[prefix + ".c_proj.bias"] = w.c_proj_b;
}
void put_mlp(reference::Parameters& g, const std::string& prefix, const reference::MlpWeights& w) {
  g[prefix + ".c_fc.weight"] = w.c_fc_w;
  g[prefix + ".c_fc.bias"] = w.c_fc_b;
  g[prefix + ".c_proj.weight"] = w.c_proj_w;
  g[prefix + ".c_proj.bias"] = w.c_proj_b;
}


template <class T>
void linear_case(const Grid& grid, const LayerShapes& s) {
  const std::int64_t n = s.batch * s.seq, in = s.hidden, out = s.ffn;
  Linear2D<T> layer(grid, "lin", in, out);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 100, grid.device());
  const Matrix x = rounded<T>(random(n, in, 1)), dy = rounded<T>(random(n, out, 2));
  const Matrix y = global(layer.forward(DistMatrix<T>::from_global(grid, x), Pass{}));
  expect_close<T>(grid, "linear output", y, reference::linear_forward(x, p.at("lin.weight"), p.at("lin.bias")));
  const Matrix dx = global(layer.backward(DistMatrix<T>::from_global(grid, dy)));
  const reference::LinearGrads g = reference::linear_backward(x, p.at("lin.weight"), dy);
  expect_close<T>(grid, "linear input gradient", dx, g.dx);
  expect_grads<T>(grid, refs, {{"lin.weight", g.dw}, {"lin.bias", g.db}});
}

template <class T>
void layernorm_case(const Grid& grid, const LayerShapes& s) {
  const std::int64_t n = s.batch * s.seq, h = s.hidden;
  LayerNorm2D<T> layer(grid, "ln_x", h);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 200, grid.device());
  // A large common offset: a one-pass E[x^2] - E[x]^2 would lose fp32's accuracy here.
  Matrix x = rounded<T>((random(n, h, 3).array() + 100.0).matrix());
  const Matrix dy = rounded<T>(random(n, h, 4));
  reference::LayerNormCache cache;
  const Matrix expected = reference::layernorm_forward(x, p.at("ln_x.weight"), p.at("ln_x.bias"), cache);
  const Matrix y = global(layer.forward(DistMatrix<T>::from_global(grid, x), Pass{}));
  expect_close<T>(grid, "layernorm output", y, expected);
  const reference::LayerNormGrads g = reference::layernorm_backward(cache, p.at("ln_x.weight"), dy);
  expect_close<T>(grid, "layernorm input gradient", global(layer.backward(DistMatrix<T>::from_global(grid, dy))), g.dx);
  expect_grads<T>(grid, refs, {{"ln_x.weight", g.dgamma}, {"ln_x.bias", g.dbeta}});
}

template <class T>
void attention_case(const Grid& grid, const LayerShapes& s, double dropout) {
  const std::int64_t n = s.batch * s.seq, h = s.hidden;
  const DropoutSpec spec{dropout, 77, 3};
  Attention2D<T> layer(grid, "attn", h, s.heads, spec);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 300, grid.device());
  const Matrix x = rounded<T>(random(n, h, 5)), dy = rounded<T>(random(n, h, 6));
  const reference::Dropout rd{dropout, 77, 9, 3};
  reference::AttentionCache cache;
  const Matrix expected = reference::attention_forward(x, attention_weights(p, "attn"), s.batch, s.heads, rd, cache);
  const Matrix y = global(layer.forward(DistMatrix<T>::from_global(grid, x), s.seq, Pass{9, true}));
  expect_close<T>(grid, "attention output", y, expected);
  const reference::AttentionGrads g =
      reference::attention_backward(cache, attention_weights(p, "attn"), s.batch, s.heads, rd, dy);
  expect_close<T>(grid, "attention input gradient", global(layer.backward(DistMatrix<T>::from_global(grid, dy))), g.dx);
  reference::Parameters expected_grads;
  put_attention(expected_grads, "attn", g.dw);
  expect_grads<T>(grid, refs, expected_grads);
}

template <class T>
void mlp_case(const Grid& grid, const LayerShapes& s) {
  const std::int64_t n = s.batch * s.seq, h = s.hidden;
  MLP2D<T> layer(grid, "mlp", h, s.ffn);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 400, grid.device());
  const Matrix x = rounded<T>(random(n, h, 7)), dy = rounded<T>(random(n, h, 8));
  reference::MlpCache cache;
  const Matrix expected = reference::mlp_forward(x, mlp_weights(p, "mlp"), cache);
  expect_close<T>(grid, "mlp output", global(layer.forward(DistMatrix<T>::from_global(grid, x), Pass{})), expected);
  const reference::MlpGrads g = reference::mlp_backward(cache, mlp_weights(p, "mlp"), dy);
  expect_close<T>(grid, "mlp input gradient", global(layer.backward(DistMatrix<T>::from_global(grid, dy))), g.dx);
  reference::Parameters expected_grads;
  put_mlp(expected_grads, "mlp", g.dw);
  expect_grads<T>(grid, refs, expected_grads);
}

template <class T>
void block_case(const Grid& grid, const LayerShapes& s, double dropout) {
  const std::int64_t n = s.batch * s.seq, h = s.hidden;
  GptConfig config = config_for(grid.q(), 1, dropout);
  TransformerBlock2D<T> layer(grid, config, 0);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 500, grid.device());
  const reference::BlockWeights w = reference::block_weights(p, 0);
  const Matrix x = rounded<T>(random(n, h, 9)), dy = rounded<T>(random(n, h, 10));
  const reference::Dropout rd{dropout, config.seed, 4, 0};
  reference::BlockCache cache;
  const Matrix expected = reference::block_forward(x, w, s.batch, s.heads, rd, cache);
  const Matrix y = global(layer.forward(DistMatrix<T>::from_global(grid, x), s.seq, Pass{4, true}));
  expect_close<T>(grid, "block output", y, expected);
  const reference::BlockGrads g = reference::block_backward(cache, w, s.batch, s.heads, rd, dy);
  expect_close<T>(grid, "block input gradient", global(layer.backward(DistMatrix<T>::from_global(grid, dy))), g.dx);
  reference::Parameters eg;
  reference::store_block_grads(eg, 0, g.dw);
  expect_grads<T>(grid, refs, eg);
}

template <class T>
void embedding_case(const Grid& grid, const LayerShapes& s) {
  const GptConfig config = config_for(grid.q(), 1, 0.2);
  const std::int64_t n = s.batch * s.seq;
  Embedding2D<T> layer(grid, config);
  std::vector<ParameterRef<T>> refs;
  layer.parameters(refs);
  const reference::Parameters p = load_random(refs, 600, grid.device());
  const std::vector<int> tokens = random_tokens(n, config.vocab, 21);
  const Matrix mask = reference::dropout_mask(n, s.hidden, config.dropout, config.seed,
                                              dropout_stream(5, 0, DropoutSite::embedding));
  expect_close<T>(grid, "embedding output", global(layer.forward(tokens, s.batch, Pass{5, true})),
                  reference::embedding_forward(p.at("wte"), p.at("wpe"), tokens, s.batch, mask));
  const Matrix dx = rounded<T>(random(n, s.hidden, 22));
  layer.backward(DistMatrix<T>::from_global(grid, dx));
  const reference::EmbeddingGrads g =
      reference::embedding_backward(config.vocab, config.max_seq, tokens, s.batch, mask, dx);
  expect_grads<T>(grid, refs, {{"wte", g.dwte}, {"wpe", g.dwpe}});
}

template <class T>
void lm_head_case(const Grid& grid, const LayerShapes& s) {
  const std::int64_t n = s.batch * s.seq;
  const Matrix x = rounded<T>(random(n, s.hidden, 31)), wte = rounded<T>(random(s.vocab, s.hidden, 32, 2.0));
  const std::vector<int> targets = random_tokens(n, s.vocab, 33);
  const auto W = DistMatrix<T>::from_global(grid, wte);
  DistMatrix<T> dwte(grid, s.vocab, s.hidden);
  LmHead2D<T> head(grid);
  const double loss = head.forward(DistMatrix<T>::from_global(grid, x), W, targets, Pass{});
  const reference::CrossEntropy ce = reference::cross_entropy(x * wte.transpose(), targets);
  CHECK(std::abs(loss - ce.loss) <= tolerance<T>(grid.gemm_math()) * ce.loss);
  expect_close<T>(grid, "lm head input gradient", global(head.backward(W, dwte)), ce.dlogits * wte);
  expect_close<T>(grid, "lm head wte gradient", global(dwte), ce.dlogits.transpose() * x);
  expect_close<T>(grid, "logits", global(head.logits(DistMatrix<T>::from_global(grid, x), W)), x * wte.transpose());
}

template <class T>
void gpt_case(const Grid& grid, const LayerShapes& s, double dropout) {
  const GptConfig config = config_for(grid.q(), 2, dropout);
  Gpt2D<T> model(grid, config);
  // Start from the shared initialization rule, rounded to T, as the reference sees it.
  reference::Parameters p = reference::gpt_init(config);
  for (auto& [name, m] : p) m = rounded<T>(m);
  const std::int64_t n = s.batch * s.seq;
  const std::vector<int> tokens = random_tokens(n, config.vocab, 1), targets = random_tokens(n, config.vocab, 2);
  const reference::GptResult r = reference::gpt_forward_backward(config, p, tokens, targets, s.batch, 3);
  const double loss = model.forward(tokens, targets, s.batch, 3);
  CHECK(std::abs(loss - r.loss) <= tolerance<T>(grid.gemm_math()) * std::abs(r.loss));
  model.backward();
  expect_grads<T>(grid, model.parameters(), r.grads);
  const Matrix logits = global(model.logits(tokens, s.batch));
  const Matrix expected_logits = [&] {
    reference::Parameters no_dropout_params = p;
    GptConfig c = config;
    c.dropout = 0;
    return reference::gpt_forward_backward(c, no_dropout_params, tokens, targets, s.batch, 0).logits;
  }();
  expect_close<T>(grid, "gpt logits", logits, expected_logits);
  if (sizeof(T) == 4 && grid.gemm_math() == ops::GemmMath::bf16) {  // bf16 operands really were used
    CHECK_FALSE(reference::compare_relative(logits, expected_logits, 1e-5).ok());
  }
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
  linear_case<double>(grid, shapes_for(q));
  linear_case<float>(grid, shapes_for(q));
}

void check_layernorm(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  layernorm_case<double>(grid, shapes_for(q));
  layernorm_case<float>(grid, shapes_for(q));
}

void check_attention(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  for (double dropout : {0.0, 0.2}) {
    attention_case<double>(grid, shapes_for(q), dropout);
    attention_case<float>(grid, shapes_for(q), dropout);
  }
}

void check_mlp(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  mlp_case<double>(grid, shapes_for(q));
  mlp_case<float>(grid, shapes_for(q));
}

void check_block(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  for (double dropout : {0.0, 0.1}) {
    block_case<double>(grid, shapes_for(q), dropout);
    block_case<float>(grid, shapes_for(q), dropout);
  }
}

void check_embedding(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  embedding_case<double>(grid, shapes_for(q));
  embedding_case<float>(grid, shapes_for(q));
}

void check_lm_head(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  lm_head_case<double>(grid, shapes_for(q));
  lm_head_case<float>(grid, shapes_for(q));
}

void check_gpt(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  gpt_case<double>(grid, shapes_for(q), 0.1);
  gpt_case<float>(grid, shapes_for(q), 0.0);
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
  AdamW<T> optimizer(grid, model.parameters(), adam);
  reference::Parameters p = reference::gpt_init(config), m, v;
  double loss = 0;
  for (int step = 1; step <= 6; ++step) {
    model.zero_grad();
    loss = model.forward(slice(tokens), slice(targets), s.batch, static_cast<std::uint64_t>(step));
    const reference::GptResult r = reference::gpt_forward_backward(config, p, tokens, targets, global_batch,
                                                                   static_cast<std::uint64_t>(step));
    CAPTURE(step);
    CHECK(std::abs(loss - r.loss) <= tolerance<T>(grid.gemm_math()) * std::abs(r.loss));
    if (step == 6) break;  // the loss after 5 steps
    model.backward();
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
  linear_case<float>(grid, s);
  layernorm_case<float>(grid, s);
  attention_case<float>(grid, s, 0.2);
  mlp_case<float>(grid, s);
  block_case<float>(grid, s, 0.1);
  embedding_case<float>(grid, s);
  lm_head_case<float>(grid, s);
  gpt_case<float>(grid, s, 0.1);
}

void check_f32_training_on(const Grid& grid) {
  const double loss = training_case<float>(grid, grid.dp());
  CHECK(std::isfinite(loss));
}

void check_mixed_precision(Communicator& world, int q) {
  Grid grid = Grid::create(world, q);
  grid.set_gemm_math(ops::GemmMath::bf16);
  check_f32_layers_on(grid);
  gpt_case<double>(grid, shapes_for(q), 0.1);  // f64 layers ignore the GEMM math: still 1e-10
  training_case<float>(grid, grid.dp());  // f32 master weights and AdamW state, bf16 GEMMs
}

void check_parameters(Communicator& world, int q) {
  const Grid grid = Grid::create(world, q);
  const GptConfig config = config_for(q, 2, 0.0);
  Gpt2D<double> model(grid, config);
  // Every element is stored exactly once in the grid.
  double stored = 0;
  for (const ParameterRef<double>& p : model.parameters()) stored += static_cast<double>(p.value.numel());
  CHECK(grid.grid().all_reduce(stored, ReduceOp::sum) == static_cast<double>(config.parameter_count()));
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
    CAPTURE(name);
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
    CHECK(with([&](GptConfig& c) { c.vocab = s.vocab + 1; }).find("vocab = " + std::to_string(s.vocab + 1)) != std::string::npos);
    CHECK(with([&](GptConfig& c) { c.ffn = s.ffn + q; }).find("ffn = " + std::to_string(s.ffn + q)) != std::string::npos);
    const std::vector<int> odd(static_cast<std::size_t>((s.batch + 1) * s.seq), 1);
    CHECK(message([&] { model.forward(odd, odd, s.batch + 1, 1); }).find("batch = " + std::to_string(s.batch + 1)) !=
          std::string::npos);
  }
  const std::vector<int> too_long(static_cast<std::size_t>(s.batch * (s.max_seq + 1)), 1);
  CHECK(message([&] { model.forward(too_long, too_long, s.batch, 1); }).find("exceeds the position table") !=
        std::string::npos);
  std::vector<int> bad_token = tokens;
  bad_token[3] = static_cast<int>(s.vocab);
  CHECK(message([&] { model.forward(bad_token, tokens, s.batch, 1); }) ==
        "embedding: token id " + std::to_string(s.vocab) + " at position 3 is outside the vocabulary [0, " +
            std::to_string(s.vocab) + ")");
  CHECK(message([&] { model.forward(tokens, bad_token, s.batch, 1); }).find("target id") != std::string::npos);
  CHECK(message([&] { model.load_global({{"h.0.attn.c_proj.weight", GlobalMatrix::Zero(s.hidden, s.hidden + 1)}}); })
            .find("is " + std::to_string(s.hidden) + "x" + std::to_string(s.hidden)) != std::string::npos);
  CHECK(message([&] { model.load_global({{"h.7.attn.bias", GlobalMatrix::Zero(1, 1)}}); }) ==
        "load_global: unknown parameter 'h.7.attn.bias'");
}

}  // namespace optimus::test

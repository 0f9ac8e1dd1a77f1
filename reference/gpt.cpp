// The reference GPT: embedding, blocks, ln_f, LM head (tied to wte or its own), cross-entropy; and AdamW.
#include "optimus/reference/gpt.hpp"

#include <cmath>

#include "optimus/core/element_math.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/rng.hpp"

namespace optimus::reference {
namespace {

std::string block_name(std::int64_t l, const char* leaf) { return "h." + std::to_string(l) + "." + leaf; }

}  // namespace

BlockWeights block_weights(const Parameters& p, std::int64_t l, const BlockConfig& block) {
  auto at = [&](const char* leaf) { return p.at(block_name(l, leaf)); };
  auto norm_bias = [&](const char* leaf) { return block.norm.centered() ? at(leaf) : Matrix(); };
  auto bias = [&](const char* leaf) { return block.bias ? at(leaf) : Matrix(); };
  return {block,
          at("ln_1.weight"),
          norm_bias("ln_1.bias"),
          {at("attn.c_attn.weight"), bias("attn.c_attn.bias"), at("attn.c_proj.weight"), bias("attn.c_proj.bias")},
          at("ln_2.weight"),
          norm_bias("ln_2.bias"),
          {at("mlp.c_fc.weight"), bias("mlp.c_fc.bias"), at("mlp.c_proj.weight"), bias("mlp.c_proj.bias")}};
}

void store_block_grads(Parameters& g, std::int64_t l, const BlockWeights& d) {
  g[block_name(l, "ln_1.weight")] = d.ln_1_w;
  if (d.block.norm.centered()) g[block_name(l, "ln_1.bias")] = d.ln_1_b;
  // Biases where the block has them (empty gradients otherwise).
  const auto put_bias = [&](const char* leaf, const Matrix& db) {
    if (db.size() > 0) g[block_name(l, leaf)] = db;
  };
  g[block_name(l, "attn.c_attn.weight")] = d.attn.c_attn_w;
  put_bias("attn.c_attn.bias", d.attn.c_attn_b);
  g[block_name(l, "attn.c_proj.weight")] = d.attn.c_proj_w;
  put_bias("attn.c_proj.bias", d.attn.c_proj_b);
  g[block_name(l, "ln_2.weight")] = d.ln_2_w;
  if (d.block.norm.centered()) g[block_name(l, "ln_2.bias")] = d.ln_2_b;
  g[block_name(l, "mlp.c_fc.weight")] = d.mlp.c_fc_w;
  put_bias("mlp.c_fc.bias", d.mlp.c_fc_b);
  g[block_name(l, "mlp.c_proj.weight")] = d.mlp.c_proj_w;
  put_bias("mlp.c_proj.bias", d.mlp.c_proj_b);
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> gpt_parameter_shapes(const GptConfig& c) {
  const std::int64_t h = c.hidden;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes = {{"wte", {c.vocab, h}}};
  if (!c.block.rope) shapes.push_back({"wpe", {c.max_seq, h}});  // learned positions
  const bool norm_bias = c.block.norm.centered();
  if (c.block.token_types > 0) shapes.push_back({"tte", {c.block.token_types, h}});  // BERT's token types
  if (c.block.embedding_norm) {
    shapes.push_back({"ln_e.weight", {h}});
    if (norm_bias) shapes.push_back({"ln_e.bias", {h}});
  }
  for (std::int64_t l = 0; l < c.layers; ++l) {
    shapes.push_back({block_name(l, "ln_1.weight"), {h}});
    if (norm_bias) shapes.push_back({block_name(l, "ln_1.bias"), {h}});
    shapes.push_back({block_name(l, "attn.c_attn.weight"), {h, c.qkv_width()}});
    if (c.block.bias) shapes.push_back({block_name(l, "attn.c_attn.bias"), {c.qkv_width()}});
    shapes.push_back({block_name(l, "attn.c_proj.weight"), {h, h}});
    if (c.block.bias) shapes.push_back({block_name(l, "attn.c_proj.bias"), {h}});
    shapes.push_back({block_name(l, "ln_2.weight"), {h}});
    if (norm_bias) shapes.push_back({block_name(l, "ln_2.bias"), {h}});
    shapes.push_back({block_name(l, "mlp.c_fc.weight"), {h, c.fc_width()}});
    if (c.block.bias) shapes.push_back({block_name(l, "mlp.c_fc.bias"), {c.fc_width()}});
    shapes.push_back({block_name(l, "mlp.c_proj.weight"), {c.ffn, h}});
    if (c.block.bias) shapes.push_back({block_name(l, "mlp.c_proj.bias"), {h}});
  }
  if (c.block.head_transform) {  // BERT's masked-LM head: the transform before ln_f, a bias on the logits
    shapes.push_back({"head.dense.weight", {h, h}});
    shapes.push_back({"head.dense.bias", {h}});
  }
  shapes.push_back({"ln_f.weight", {h}});
  if (norm_bias) shapes.push_back({"ln_f.bias", {h}});
  if (c.block.head_transform) shapes.push_back({"head.bias", {c.vocab}});
  if (!c.block.tied_head) shapes.push_back({"lm_head.weight", {c.vocab, h}});
  return shapes;
}

Parameters gpt_init(const GptConfig& c) {
  Parameters p;
  for (const auto& [name, shape] : gpt_parameter_shapes(c)) {
    const std::int64_t rows = shape.size() == 2 ? shape[0] : 1;
    const std::int64_t cols = shape.back();
    const CounterRng rng(c.seed, parameter_stream(name));
    const Distribution dist = initial_distribution(c, name);
    Matrix m(rows, cols);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < cols; ++k) m(r, k) = dist.sample(rng, static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(k));
    p[name] = m;
  }
  return p;
}

GptResult gpt_forward_backward(const GptConfig& c, const Parameters& p, const std::vector<int>& tokens,
                               const std::vector<int>& targets, std::int64_t batch, std::uint64_t step) {
  return gpt_forward_backward(c, p, tokens, targets, EncoderInputs{}, batch, step);
}

namespace {

// What the embedding's backward needs of its forward.
struct EmbeddingCache {
  Matrix mask;             // the embedding's dropout [n, h]
  std::vector<int> types;  // each token's type (BERT's; 0 elsewhere)
  NormCache ln_e;          // BERT's embedding norm
};

// The embedding's forward [n, h]: wte's rows of the tokens and wpe's (none with rotary positions: added in the
// attention), BERT's token types and norm, then the dropout.
Matrix embedding_pass(const GptConfig& c, const Parameters& p, const std::vector<int>& tokens,
                      const EncoderInputs& inputs, std::int64_t batch, std::uint64_t step, EmbeddingCache& cache) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const Matrix wpe = c.block.rope ? Matrix() : p.at("wpe");
  cache.mask = dropout_mask(n, c.hidden, c.dropout, c.seed, dropout_stream(step, 0, DropoutSite::embedding));
  cache.types = inputs.token_types.empty() ? std::vector<int>(tokens.size(), 0) : inputs.token_types;
  Matrix x = embedding_forward(p.at("wte"), wpe, tokens, batch, Matrix::Ones(n, c.hidden));
  if (c.block.token_types > 0) {
    for (std::int64_t r = 0; r < n; ++r) x.row(r) += p.at("tte").row(cache.types[static_cast<std::size_t>(r)]);
  }
  const Matrix ln_e_bias = c.block.norm.centered() && c.block.embedding_norm ? p.at("ln_e.bias") : Matrix();
  if (c.block.embedding_norm) x = norm_forward(c.block.norm, x, p.at("ln_e.weight"), ln_e_bias, cache.ln_e);
  return x.cwiseProduct(cache.mask);
}

// The embedding's gradients from dx [n, h] (the blocks' input gradient), into g; wte's adds the tied head's `dhead`.
void embedding_pass_backward(const GptConfig& c, const Parameters& p, const std::vector<int>& tokens,
                             std::int64_t batch, const EmbeddingCache& cache, Matrix dx, const Matrix& dhead,
                             Parameters& g) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  dx = dx.cwiseProduct(cache.mask);
  if (c.block.embedding_norm) {
    const LayerNormGrads dln_e = norm_backward(cache.ln_e, p.at("ln_e.weight"), dx);
    g["ln_e.weight"] = dln_e.dgamma;
    if (c.block.norm.centered()) g["ln_e.bias"] = dln_e.dbeta;
    dx = dln_e.dx;
  }
  if (c.block.token_types > 0) {
    Matrix dtte = Matrix::Zero(c.block.token_types, c.hidden);
    for (std::int64_t r = 0; r < n; ++r) dtte.row(cache.types[static_cast<std::size_t>(r)]) += dx.row(r);
    g["tte"] = dtte;
  }
  const EmbeddingGrads de = embedding_backward(c.vocab, c.max_seq, tokens, batch, Matrix::Ones(n, c.hidden), dx);
  if (c.block.tied_head) {
    g["wte"] = dhead + de.dwte;
  } else {
    g["wte"] = de.dwte;
    g["lm_head.weight"] = dhead;
  }
  if (!c.block.rope) g["wpe"] = de.dwpe;
}

// What the head's backward needs of its forward.
struct HeadCache {
  Matrix transform_in, transform_pre;  // BERT's transform: its input and its GELU's
  NormCache ln_f;
  Matrix xf;  // ln_f's output [n, h]
};

// The logits [n, vocab] of the blocks' output x: BERT's transform (dense and the blocks' GELU), ln_f, the head's
// weights `head` and BERT's bias.
Matrix head_pass(const GptConfig& c, const Parameters& p, const Matrix& head, Matrix x, HeadCache& cache) {
  const bool erf = c.block.mlp == MlpKind::gelu_erf;
  if (c.block.head_transform) {
    cache.transform_in = x;
    cache.transform_pre = linear_forward(x, p.at("head.dense.weight"), p.at("head.dense.bias"));
    x = erf ? gelu_erf_forward(cache.transform_pre) : gelu_forward(cache.transform_pre);
  }
  cache.xf = norm_forward(c.block.norm, x, p.at("ln_f.weight"),
                          c.block.norm.centered() ? p.at("ln_f.bias") : Matrix(), cache.ln_f);
  Matrix logits = cache.xf * head.transpose();
  if (c.block.head_transform) logits.rowwise() += p.at("head.bias").row(0);
  return logits;
}

// The blocks' output gradient from dlogits; the head's parameters' gradients into g (the head's weights' apart).
Matrix head_pass_backward(const GptConfig& c, const Parameters& p, const Matrix& head, const HeadCache& cache,
                          const Matrix& dlogits, Parameters& g) {
  const LayerNormGrads dln_f = norm_backward(cache.ln_f, p.at("ln_f.weight"), dlogits * head);
  g["ln_f.weight"] = dln_f.dgamma;
  if (c.block.norm.centered()) g["ln_f.bias"] = dln_f.dbeta;
  Matrix dx = dln_f.dx;
  if (c.block.head_transform) {
    const bool erf = c.block.mlp == MlpKind::gelu_erf;
    g["head.bias"] = dlogits.colwise().sum();
    const Matrix dpre = erf ? gelu_erf_backward(cache.transform_pre, dx) : gelu_backward(cache.transform_pre, dx);
    const LinearGrads dense = linear_backward(cache.transform_in, p.at("head.dense.weight"), dpre);
    g["head.dense.weight"] = dense.dw;
    g["head.dense.bias"] = dense.db;
    dx = dense.dx;
  }
  return dx;
}

}  // namespace

GptResult gpt_forward_backward(const GptConfig& c, const Parameters& p, const std::vector<int>& tokens,
                               const std::vector<int>& targets, const EncoderInputs& inputs, std::int64_t batch,
                               std::uint64_t step) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t s = n / batch;
  OPTIMUS_CHECK(s <= c.max_seq, "reference: sequence ", s, " longer than max_seq ", c.max_seq);
  const Matrix& head = c.block.tied_head ? p.at("wte") : p.at("lm_head.weight");
  Dropout dropout{c.dropout, c.seed, step, 0};

  EmbeddingCache embedding;
  Matrix x = embedding_pass(c, p, tokens, inputs, batch, step, embedding);
  std::vector<BlockCache> caches(static_cast<std::size_t>(c.layers));
  for (std::int64_t l = 0; l < c.layers; ++l) {
    dropout.layer = l;
    x = block_forward(x, block_weights(p, l, c.block), batch, c.heads, inputs.lengths, dropout,
                      caches[static_cast<std::size_t>(l)]);
  }
  HeadCache ends;
  GptResult result;
  result.logits = head_pass(c, p, head, x, ends);
  const CrossEntropy ce = cross_entropy(result.logits, targets);
  result.loss = ce.loss;

  // Backward.
  Parameters& g = result.grads;
  const Matrix dhead = ce.dlogits.transpose() * ends.xf;
  Matrix dx = head_pass_backward(c, p, head, ends, ce.dlogits, g);
  for (std::int64_t l = c.layers - 1; l >= 0; --l) {
    dropout.layer = l;
    const BlockGrads bg = block_backward(caches[static_cast<std::size_t>(l)], block_weights(p, l, c.block), batch,
                                         c.heads, dropout, dx);
    store_block_grads(g, l, bg.dw);
    dx = bg.dx;
  }
  embedding_pass_backward(c, p, tokens, batch, embedding, std::move(dx), dhead, g);
  return result;
}

Matrix embedding_forward(const Matrix& wte, const Matrix& wpe, const std::vector<int>& tokens, std::int64_t batch,
                         const Matrix& mask) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t s = n / batch;
  Matrix x(n, wte.cols());
  for (std::int64_t r = 0; r < n; ++r) {
    x.row(r) = wte.row(tokens[static_cast<std::size_t>(r)]);
    if (wpe.size() > 0) x.row(r) += wpe.row(r % s);
  }
  return x.cwiseProduct(mask);
}

EmbeddingGrads embedding_backward(std::int64_t vocab, std::int64_t max_seq, const std::vector<int>& tokens,
                                  std::int64_t batch, const Matrix& mask, const Matrix& dx_in) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t s = n / batch;
  const Matrix dx = dx_in.cwiseProduct(mask);
  EmbeddingGrads g{Matrix::Zero(vocab, dx.cols()), Matrix::Zero(max_seq, dx.cols())};  // dwpe unused without wpe
  for (std::int64_t r = 0; r < n; ++r) {
    g.dwte.row(tokens[static_cast<std::size_t>(r)]) += dx.row(r);
    g.dwpe.row(r % s) += dx.row(r);
  }
  return g;
}

CrossEntropy cross_entropy(const Matrix& logits, const std::vector<int>& targets) {
  const std::int64_t n = logits.rows();
  CrossEntropy ce{0.0, Matrix::Zero(n, logits.cols())};
  std::int64_t predicted = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const int target = targets[static_cast<std::size_t>(r)];
    if (target == math::kIgnoredTarget) continue;  // not predicted: no loss, no gradient
    const double max = logits.row(r).maxCoeff();
    const Eigen::RowVectorXd e = (logits.row(r).array() - max).exp();
    const double sum = e.sum();
    ce.loss += std::log(sum) + max - logits(r, target);
    ce.dlogits.row(r) = e / sum;
    ce.dlogits(r, target) -= 1.0;
    ++predicted;
  }
  if (predicted == 0) return ce;  // nothing predicted: a loss of 0, no gradient
  ce.loss /= static_cast<double>(predicted);
  ce.dlogits /= static_cast<double>(predicted);
  return ce;
}

double adamw_step(const AdamWConfig& a, int t, Parameters& params, Parameters grads, Parameters& m, Parameters& v) {
  double sq = 0;
  for (const auto& [name, grad] : grads) sq += grad.squaredNorm();
  const double norm = std::sqrt(sq);
  const double clip = a.max_grad_norm > 0 && norm > a.max_grad_norm ? a.max_grad_norm / norm : 1.0;
  const double c1 = 1.0 - std::pow(a.beta1, t), c2 = 1.0 - std::pow(a.beta2, t);
  for (auto& [name, p] : params) {
    const Matrix g = clip * grads.at(name);
    Matrix& mm = m.try_emplace(name, Matrix::Zero(p.rows(), p.cols())).first->second;
    Matrix& vv = v.try_emplace(name, Matrix::Zero(p.rows(), p.cols())).first->second;
    mm = a.beta1 * mm + (1 - a.beta1) * g;
    vv = a.beta2 * vv + (1 - a.beta2) * g.cwiseProduct(g);
    const bool decay = name.find("ln_") == std::string::npos && name.find(".bias") == std::string::npos;
    const Matrix update = (mm / c1).array() / ((vv / c2).array().sqrt() + a.eps);
    p -= a.lr * (update + (decay ? a.weight_decay : 0.0) * p);
  }
  return norm;
}

}  // namespace optimus::reference

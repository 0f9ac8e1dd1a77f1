// Reference multi-head self-attention (causal, or an encoder's bidirectional), MLP and transformer block.
#include <algorithm>
#include <cmath>
#include <limits>

#include "optimus/core/rng.hpp"
#include "optimus/reference/layers.hpp"

namespace optimus::reference {
namespace {

Matrix probs_dropout_mask(std::int64_t rows, std::int64_t s, const Dropout& d) {
  return dropout_mask(rows, s, d.p, d.seed,
                      dropout_stream(d.step, static_cast<std::uint64_t>(d.layer), DropoutSite::attention_probs));
}

}  // namespace

Matrix rotary(const Matrix& x, std::int64_t s, std::int64_t heads, double theta, bool transpose) {
  const std::int64_t d = x.cols() / heads, m = d / 2;
  Matrix y(x.rows(), x.cols());
  for (std::int64_t r = 0; r < x.rows(); ++r) {
    const auto pos = static_cast<double>(r % s);
    for (std::int64_t t = 0; t < heads; ++t) {
      for (std::int64_t i = 0; i < m; ++i) {
        const double angle = pos * std::pow(theta, -static_cast<double>(i) / static_cast<double>(m));
        const double c = std::cos(angle), sn = transpose ? -std::sin(angle) : std::sin(angle);
        const double a = x(r, t * d + i), b = x(r, t * d + i + m);
        y(r, t * d + i) = c * a - sn * b;
        y(r, t * d + i + m) = sn * a + c * b;
      }
    }
  }
  return y;
}

Matrix attention_forward(const Matrix& x, const AttentionWeights& w, std::int64_t batch, std::int64_t heads,
                         std::int64_t kv_heads, const std::optional<RopeSpec>& rope, const KeyMask& keys,
                         const Dropout& dropout, AttentionCache& cache) {
  const std::int64_t n = x.rows(), h = x.cols(), s = n / batch, d = h / heads, kv = kv_heads * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  cache.x = x;
  cache.qkv = linear_forward(x, w.c_attn_w, w.c_attn_b);
  if (rope) {
    cache.qkv.leftCols(h) = rotary(cache.qkv.leftCols(h), s, heads, rope->theta, false);
    cache.qkv.middleCols(h, kv) = rotary(cache.qkv.middleCols(h, kv), s, kv_heads, rope->theta, false);
  }
  cache.probs.resize(batch * heads * s, s);
  cache.merged.resize(n, h);
  const Matrix mask = probs_dropout_mask(batch * heads * s, s, dropout);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t length = keys.lengths.empty() ? s : keys.lengths[static_cast<std::size_t>(b)];
    for (std::int64_t t = 0; t < heads; ++t) {
      const std::int64_t u = t / (heads / kv_heads);  // its key/value head
      const Matrix q = cache.qkv.block(b * s, t * d, s, d);
      const Matrix k = cache.qkv.block(b * s, h + u * d, s, d);
      const Matrix v = cache.qkv.block(b * s, h + kv + u * d, s, d);
      Matrix scores = scale * q * k.transpose();
      Matrix p(s, s);
      for (std::int64_t i = 0; i < s; ++i) {
        const std::int64_t seen = std::min(keys.causal ? i + 1 : s, length);  // the keys query i sees: 0 .. seen - 1
        double max = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < seen; ++j) max = std::max(max, scores(i, j));
        double sum = 0;
        for (std::int64_t j = 0; j < s; ++j) {
          p(i, j) = j < seen ? std::exp(scores(i, j) - max) : 0.0;
          sum += p(i, j);
        }
        p.row(i) /= sum;
      }
      const std::int64_t row = (b * heads + t) * s;
      cache.probs.block(row, 0, s, s) = p;
      cache.merged.block(b * s, t * d, s, d) = p.cwiseProduct(mask.block(row, 0, s, s)) * v;
    }
  }
  return linear_forward(cache.merged, w.c_proj_w, w.c_proj_b);
}

AttentionGrads attention_backward(const AttentionCache& cache, const AttentionWeights& w, std::int64_t batch,
                                  std::int64_t heads, std::int64_t kv_heads, const std::optional<RopeSpec>& rope,
                                  const Dropout& dropout, const Matrix& dy) {
  const std::int64_t n = cache.x.rows(), h = cache.x.cols(), s = n / batch, d = h / heads, kv = kv_heads * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  AttentionGrads g;
  const LinearGrads proj = linear_backward(cache.merged, w.c_proj_w, dy);
  g.dw.c_proj_w = proj.dw;
  g.dw.c_proj_b = w.c_proj_b.size() > 0 ? proj.db : Matrix();
  Matrix dqkv = Matrix::Zero(n, h + 2 * kv);  // a key/value head's gradients summed over its query heads
  const Matrix mask = probs_dropout_mask(batch * heads * s, s, dropout);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < heads; ++t) {
      const std::int64_t u = t / (heads / kv_heads);
      const Matrix q = cache.qkv.block(b * s, t * d, s, d);
      const Matrix k = cache.qkv.block(b * s, h + u * d, s, d);
      const Matrix v = cache.qkv.block(b * s, h + kv + u * d, s, d);
      const std::int64_t row = (b * heads + t) * s;
      const Matrix p = cache.probs.block(row, 0, s, s);
      const Matrix m = mask.block(row, 0, s, s);
      const Matrix dout = proj.dx.block(b * s, t * d, s, d);
      dqkv.block(b * s, h + kv + u * d, s, d) += p.cwiseProduct(m).transpose() * dout;
      const Matrix dp = (dout * v.transpose()).cwiseProduct(m);
      Matrix ds(s, s);
      for (std::int64_t i = 0; i < s; ++i) {
        const double dot = dp.row(i).dot(p.row(i));
        ds.row(i) = scale * p.row(i).array() * (dp.row(i).array() - dot);
      }
      dqkv.block(b * s, t * d, s, d) = ds * k;
      dqkv.block(b * s, h + u * d, s, d) += ds.transpose() * q;
    }
  }
  if (rope) {  // the turned queries' and keys' gradients, through the rotations' transposes
    dqkv.leftCols(h) = rotary(dqkv.leftCols(h), s, heads, rope->theta, true);
    dqkv.middleCols(h, kv) = rotary(dqkv.middleCols(h, kv), s, kv_heads, rope->theta, true);
  }
  const LinearGrads attn = linear_backward(cache.x, w.c_attn_w, dqkv);
  g.dw.c_attn_w = attn.dw;
  g.dw.c_attn_b = w.c_attn_b.size() > 0 ? attn.db : Matrix();
  g.dx = attn.dx;
  return g;
}

namespace {
// sigma(v) = 1 / (1 + e^-v); silu(v) = v sigma(v); silu'(v) = sigma(v) + v sigma(v) (1 - sigma(v)).
Eigen::ArrayXXd sigma(const Matrix& v) { return 1.0 / (1.0 + (-v.array()).exp()); }

// SwiGLU of pre = [gate | up]: silu(gate) * up.
Matrix swiglu_forward(const Matrix& pre) {
  const std::int64_t f = pre.cols() / 2;
  const Matrix gate = pre.leftCols(f), up = pre.rightCols(f);
  return (gate.array() * sigma(gate) * up.array()).matrix();
}

// d[gate | up] from dact: [dact * up * silu'(gate) | dact * silu(gate)].
Matrix swiglu_backward(const Matrix& pre, const Matrix& dact) {
  const std::int64_t f = pre.cols() / 2;
  const Matrix gate = pre.leftCols(f), up = pre.rightCols(f);
  const Eigen::ArrayXXd sg = sigma(gate);
  Matrix d(pre.rows(), pre.cols());
  d.leftCols(f) = (dact.array() * up.array() * (sg + gate.array() * sg * (1.0 - sg))).matrix();
  d.rightCols(f) = (dact.array() * gate.array() * sg).matrix();
  return d;
}
}  // namespace

Matrix mlp_forward(const Matrix& x, const MlpWeights& w, MlpKind kind, MlpCache& cache) {
  cache.x = x;
  cache.pre = linear_forward(x, w.c_fc_w, w.c_fc_b);
  cache.act = kind == MlpKind::gelu       ? gelu_forward(cache.pre)
              : kind == MlpKind::gelu_erf ? gelu_erf_forward(cache.pre)
                                          : swiglu_forward(cache.pre);
  return linear_forward(cache.act, w.c_proj_w, w.c_proj_b);
}

MlpGrads mlp_backward(const MlpCache& cache, const MlpWeights& w, MlpKind kind, const Matrix& dy) {
  MlpGrads g;
  const LinearGrads proj = linear_backward(cache.act, w.c_proj_w, dy);
  const Matrix dpre = kind == MlpKind::gelu       ? gelu_backward(cache.pre, proj.dx)
                      : kind == MlpKind::gelu_erf ? gelu_erf_backward(cache.pre, proj.dx)
                                                  : swiglu_backward(cache.pre, proj.dx);
  const LinearGrads fc = linear_backward(cache.x, w.c_fc_w, dpre);
  g.dx = fc.dx;
  g.dw = {fc.dw, w.c_fc_b.size() > 0 ? fc.db : Matrix(), proj.dw, w.c_proj_b.size() > 0 ? proj.db : Matrix()};
  return g;
}

namespace {
std::int64_t kv_heads_of(const BlockConfig& block, std::int64_t heads) {
  return block.kv_heads > 0 ? block.kv_heads : heads;
}

Matrix residual_mask(std::int64_t rows, std::int64_t cols, const Dropout& d, DropoutSite site) {
  return dropout_mask(rows, cols, d.p, d.seed, dropout_stream(d.step, static_cast<std::uint64_t>(d.layer), site));
}
}  // namespace

Matrix block_forward(const Matrix& x, const BlockWeights& w, std::int64_t batch, std::int64_t heads,
                     const Dropout& dropout, BlockCache& cache) {
  return block_forward(x, w, batch, heads, {}, dropout, cache);
}

Matrix block_forward(const Matrix& x, const BlockWeights& w, std::int64_t batch, std::int64_t heads,
                     const std::vector<int>& lengths, const Dropout& dropout, BlockCache& cache) {
  const BlockConfig& b = w.block;
  const KeyMask keys{.causal = !b.bidirectional, .lengths = lengths};
  if (b.post_norm) {  // x1 = ln_1(x + drop(attn(x))), y = ln_2(x1 + drop(mlp(x1)))
    const Matrix a =
        attention_forward(x, w.attn, batch, heads, kv_heads_of(b, heads), b.rope, keys, dropout, cache.attn);
    const Matrix x1 = norm_forward(
        b.norm, x + a.cwiseProduct(residual_mask(x.rows(), x.cols(), dropout, DropoutSite::attention_residual)),
        w.ln_1_w, w.ln_1_b, cache.ln_1);
    const Matrix m = mlp_forward(x1, w.mlp, b.mlp, cache.mlp);
    return norm_forward(b.norm,
                        x1 + m.cwiseProduct(residual_mask(x.rows(), x.cols(), dropout, DropoutSite::mlp_residual)),
                        w.ln_2_w, w.ln_2_b, cache.ln_2);
  }
  const Matrix a = attention_forward(norm_forward(b.norm, x, w.ln_1_w, w.ln_1_b, cache.ln_1), w.attn, batch, heads,
                                     kv_heads_of(b, heads), b.rope, keys, dropout, cache.attn);
  const Matrix x1 = x + a.cwiseProduct(residual_mask(x.rows(), x.cols(), dropout, DropoutSite::attention_residual));
  const Matrix m = mlp_forward(norm_forward(b.norm, x1, w.ln_2_w, w.ln_2_b, cache.ln_2), w.mlp, b.mlp, cache.mlp);
  return x1 + m.cwiseProduct(residual_mask(x.rows(), x.cols(), dropout, DropoutSite::mlp_residual));
}

BlockGrads block_backward(const BlockCache& cache, const BlockWeights& w, std::int64_t batch, std::int64_t heads,
                          const Dropout& dropout, const Matrix& dy) {
  BlockGrads g;
  const std::int64_t n = dy.rows(), h = dy.cols();
  const BlockConfig& b = w.block;
  LayerNormGrads ln_1, ln_2;
  MlpGrads mlp;
  AttentionGrads attn;
  if (b.post_norm) {
    ln_2 = norm_backward(cache.ln_2, w.ln_2_w, dy);  // ds2: the gradient of x1 + drop(m)
    mlp = mlp_backward(cache.mlp, w.mlp, b.mlp,
                       ln_2.dx.cwiseProduct(residual_mask(n, h, dropout, DropoutSite::mlp_residual)));
    ln_1 = norm_backward(cache.ln_1, w.ln_1_w, ln_2.dx + mlp.dx);  // ds1, from dx1
    attn = attention_backward(cache.attn, w.attn, batch, heads, kv_heads_of(b, heads), b.rope, dropout,
                              ln_1.dx.cwiseProduct(residual_mask(n, h, dropout, DropoutSite::attention_residual)));
    g.dx = ln_1.dx + attn.dx;
  } else {
    mlp = mlp_backward(cache.mlp, w.mlp, b.mlp,
                       dy.cwiseProduct(residual_mask(n, h, dropout, DropoutSite::mlp_residual)));
    ln_2 = norm_backward(cache.ln_2, w.ln_2_w, mlp.dx);
    const Matrix dx1 = dy + ln_2.dx;
    attn = attention_backward(cache.attn, w.attn, batch, heads, kv_heads_of(b, heads), b.rope, dropout,
                              dx1.cwiseProduct(residual_mask(n, h, dropout, DropoutSite::attention_residual)));
    ln_1 = norm_backward(cache.ln_1, w.ln_1_w, attn.dx);
    g.dx = dx1 + ln_1.dx;
  }
  g.dw.block = w.block;
  g.dw.ln_1_w = ln_1.dgamma;
  g.dw.ln_1_b = ln_1.dbeta;
  g.dw.attn = attn.dw;
  g.dw.ln_2_w = ln_2.dgamma;
  g.dw.ln_2_b = ln_2.dbeta;
  g.dw.mlp = mlp.dw;
  return g;
}

}  // namespace optimus::reference

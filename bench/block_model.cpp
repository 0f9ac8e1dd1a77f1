// The block benchmarks' shared configuration, FLOP count and reference (see block_model.hpp).
#include "block_model.hpp"

#include <vector>

#include "optimus/programs/arch_options.hpp"

namespace optimus::bench {

BlockShape block_shape_option(const cli::Options& o, std::int64_t batch) {
  const BlockConfig block = cli::arch_of(o);
  GptConfig g;
  g.hidden = o.integer("h", 256);
  g.heads = o.integer("heads", 8);
  g.ffn = o.integer("ffn", block == BlockConfig{} ? 4 * g.hidden : llama_ffn(g.hidden, 64));
  g.block = block;
  return BlockShape::of(g, o.integer("b", batch), o.integer("s", 64));
}

GptConfig block_config(const BlockShape& shape, const BlockConfig& block, std::int64_t layers) {
  GptConfig g;
  g.hidden = shape.hidden;
  g.heads = shape.heads;
  g.ffn = shape.ffn;
  g.layers = layers;
  g.vocab = 8;
  g.max_seq = shape.seq;
  g.dropout = 0.0;
  g.seed = 99;
  g.block = block;
  return g;
}

double block_flops(const BlockShape& shape, std::int64_t layers) {
  const double n = static_cast<double>(shape.tokens()), h = static_cast<double>(shape.hidden);
  const double f = static_cast<double>(shape.ffn), s = static_cast<double>(shape.seq);
  const double qkv = static_cast<double>(shape.qkv_width), fc = static_cast<double>(shape.fc_width);
  const double forward = 2.0 * n * (h * qkv + h * h + h * fc + f * h) + 4.0 * n * s * h;
  return 3.0 * forward * static_cast<double>(layers);
}

std::pair<reference::Matrix, reference::Matrix> reference_blocks(const BlockShape& shape, const BlockConfig& block,
                                                                 std::int64_t layers, double dropout,
                                                                 const reference::Matrix& x,
                                                                 const reference::Matrix& dy) {
  const GptConfig g = block_config(shape, block, layers);
  const reference::Parameters p = reference::gpt_init(g);
  std::vector<reference::BlockWeights> w;
  for (std::int64_t l = 0; l < layers; ++l) w.push_back(reference::block_weights(p, l, block));
  std::vector<reference::BlockCache> caches(w.size());
  reference::Matrix y = x;
  for (std::size_t l = 0; l < w.size(); ++l) {
    y = reference::block_forward(y, w[l], shape.batch, shape.heads, {dropout, g.seed, 1, static_cast<std::int64_t>(l)},
                                 caches[l]);
  }
  reference::Matrix d = dy;
  for (std::size_t l = w.size(); l-- > 0;) {
    d = reference::block_backward(caches[l], w[l], shape.batch, shape.heads,
                                  {dropout, g.seed, 1, static_cast<std::int64_t>(l)}, d)
            .dx;
  }
  return {y, d};
}

}  // namespace optimus::bench

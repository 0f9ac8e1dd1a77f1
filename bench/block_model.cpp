// The block benchmarks' shared configuration, FLOP count and reference (see block_model.hpp).
#include "block_model.hpp"

#include <vector>

namespace optimus::bench {

BlockShape block_shape_option(const cli::Options& o, std::int64_t batch) {
  BlockShape shape;
  shape.batch = o.integer("b", batch);
  shape.seq = o.integer("s", 64);
  shape.hidden = o.integer("h", 256);
  shape.heads = o.integer("heads", 8);
  shape.ffn = o.integer("ffn", 4 * shape.hidden);
  return shape;
}

GptConfig block_config(const BlockShape& shape, std::int64_t layers) {
  GptConfig g;
  g.hidden = shape.hidden;
  g.heads = shape.heads;
  g.ffn = shape.ffn;
  g.layers = layers;
  g.vocab = 8;
  g.max_seq = shape.seq;
  g.dropout = 0.0;
  g.seed = 99;
  return g;
}

double block_flops(const BlockShape& shape, std::int64_t layers) {
  const double n = static_cast<double>(shape.tokens()), h = static_cast<double>(shape.hidden);
  const double f = static_cast<double>(shape.ffn), s = static_cast<double>(shape.seq);
  const double forward = 2.0 * n * (4.0 * h * h + 2.0 * h * f) + 4.0 * n * s * h;
  return 3.0 * forward * static_cast<double>(layers);
}

std::pair<reference::Matrix, reference::Matrix> reference_blocks(const BlockShape& shape, std::int64_t layers,
                                                                 double dropout, const reference::Matrix& x,
                                                                 const reference::Matrix& dy) {
  const GptConfig g = block_config(shape, layers);
  const reference::Parameters p = reference::gpt_init(g);
  std::vector<reference::BlockWeights> w;
  for (std::int64_t l = 0; l < layers; ++l) w.push_back(reference::block_weights(p, l, BlockConfig{}));
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

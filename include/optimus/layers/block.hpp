// optimus::TransformerBlock2D: the GPT-2 pre-LayerNorm block on the q x q grid.
//   x1 = x + dropout(attn(ln_1(x))),  y = x1 + dropout(mlp(ln_2(x1)));  x, x1, y: [N, h].
// Parameters are named h.<layer>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}.{weight, bias}.
#pragma once

#include "optimus/core/gpt_config.hpp"
#include "optimus/layers/attention.hpp"
#include "optimus/layers/layernorm.hpp"
#include "optimus/layers/mlp.hpp"

namespace optimus {

template <class T>
class TransformerBlock2D {
 public:
  TransformerBlock2D(const Grid& grid, const GptConfig& config, std::int64_t layer);

  DistMatrix<T> forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass);
  DistMatrix<T> backward(const DistMatrix<T>& dy);

  void parameters(std::vector<ParameterRef<T>>& out);
  void zero_grad();

 private:
  GptConfig config_;
  std::int64_t layer_;
  LayerNorm2D<T> ln_1_;
  Attention2D<T> attn_;
  LayerNorm2D<T> ln_2_;
  MLP2D<T> mlp_;
  std::uint64_t step_ = 0;
};

extern template class TransformerBlock2D<float>;
extern template class TransformerBlock2D<double>;

}  // namespace optimus

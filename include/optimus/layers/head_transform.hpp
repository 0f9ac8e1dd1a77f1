// optimus::HeadTransform<T>: BERT's masked-LM head transform before the model's final norm (BlockConfig::head_transform):
// y = gelu(x W + b), W [h, h] (head.dense), GELU the blocks' (tanh form, or the exact erf form: BERT's), on the grid the
// activations live on — the q x q grid (a Linear2D: SUMMA), or the 1D group's one-rank grid, where every rank holds W
// whole (the model marks it replicated, as ln_f) and computes the same y. The model's ln_f then normalizes y: it is the
// transform's LayerNorm (Hugging Face's cls.predictions.transform.LayerNorm).
//   x, y: [N, h]. Saved for backward (an MlpContext: c_fc the dense's, pre GELU's input; c_proj unused).
#pragma once

#include <string>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/linear.hpp"
#include "optimus/layers/weight_gradients.hpp"

namespace optimus {

template <class T>
class HeadTransform {
 public:
  using Context = MlpContext<T>;

  // name: "head" (the parameters head.dense.weight [h, h] and head.dense.bias [h]); activation: gelu or gelu_erf
  // (else optimus::Error naming it).
  HeadTransform(const Grid& grid, const std::string& name, std::int64_t hidden, MlpKind activation);

  DistMatrix<T> forward(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  // dx from dy [N, h]; accumulates dW, db (queued in `later` where given: the split backward).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);

  void parameters(std::vector<ParameterRef<T>>& out) { dense_.parameters(out); }
  void zero_grad() { dense_.zero_grad(); }

 private:
  DistMatrix<T> backward_any(Context saved, const DistMatrix<T>& dy, WeightGradients* later);

  Grid grid_;
  MlpKind activation_;
  Linear2D<T> dense_;
};

extern template class HeadTransform<float>;
extern template class HeadTransform<double>;

}  // namespace optimus

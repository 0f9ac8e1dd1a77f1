// optimus::MLP2D: y = c_proj(gelu(c_fc(x))); x, y: [N, h], c_fc: h -> ffn, c_proj: ffn -> h (two Linear2D).
// Saved for backward (MlpContext): the c_fc output [N, ffn] (for GELU's derivative), plus what each Linear2D saves.
#pragma once

#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/linear.hpp"

namespace optimus {

template <class T>
class MLP2D {
 public:
  MLP2D(const Grid& grid, const std::string& name, std::int64_t hidden, std::int64_t ffn);
  // The same with its linears' parameters and gradients where `tags` say (ParameterTags).
  MLP2D(const Grid& grid, const ParameterTags& tags, const std::string& name, std::int64_t hidden, std::int64_t ffn);
  // The same with its linears' biases or without.
  MLP2D(const Grid& grid, const ParameterTags& tags, const std::string& name, std::int64_t hidden, std::int64_t ffn,
        bool bias);

  using Context = MlpContext<T>;

  // x, y: [N, h]; a training pass fills `saved`.
  DistMatrix<T> forward(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  // The same from an input kept as c_fc keeps it (LayerNorm2D::forward_saved), which c_fc takes over.
  DistMatrix<T> forward(SavedActivation<T> x, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same, split: the input gradient now, the weight gradients queued in `later` (weight_gradients.hpp).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);

  void parameters(std::vector<ParameterRef<T>>& out);
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out);
  void zero_grad();

 private:
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later);
  Linear2D<T> c_fc_, c_proj_;
};

extern template class MLP2D<float>;
extern template class MLP2D<double>;

}  // namespace optimus

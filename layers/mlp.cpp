// MLP<T, Split>: c_fc and c_proj around GELU or SwiGLU, for both splits (MLP2D, megatron::MLP1D).
#include "optimus/layers/mlp.hpp"

#include "optimus/layers/megatron/block.hpp"

#include "block_logic.hpp"

namespace optimus {

template <class T, class Split>
MLP<T, Split>::MLP(const Place& place, const std::string& name, std::int64_t hidden, std::int64_t ffn)
    : MLP(place, Split::tags_of(place), name, hidden, ffn) {}

template <class T, class Split>
MLP<T, Split>::MLP(const Place& place, const ParameterTags& tags, const std::string& name, std::int64_t hidden,
                   std::int64_t ffn)
    : MLP(place, tags, name, hidden, ffn, MlpKind::gelu, true) {}

template <class T, class Split>
MLP<T, Split>::MLP(const Place& place, const ParameterTags& tags, const std::string& name, std::int64_t hidden,
                   std::int64_t ffn, MlpKind kind, bool bias)
    : kind_(kind),
      c_fc_(place, tags, name + ".c_fc", hidden, fc_width(kind, ffn), fc_columns(kind, ffn), bias),
      c_proj_(Split::template row_linear<T>(place, tags, name + ".c_proj", ffn, hidden, bias)) {}

template <class T, class Split>
DistMatrix<T> MLP<T, Split>::forward(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  return detail::mlp_forward<T>(c_fc_, c_proj_, kind_, x, pass, saved);
}

template <class T, class Split>
DistMatrix<T> MLP<T, Split>::forward(SavedActivation<T> x, const Pass& pass, Context& saved) {
  return detail::mlp_forward<T>(c_fc_, c_proj_, kind_, std::move(x), pass, saved);
}

template <class T, class Split>
DistMatrix<T> MLP<T, Split>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  return detail::mlp_backward<T>(c_fc_, c_proj_, kind_, std::move(saved), dy, later);
}

template <class T, class Split>
DistMatrix<T> MLP<T, Split>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T, class Split>
DistMatrix<T> MLP<T, Split>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template class MLP<float, Split2D>;
template class MLP<double, Split2D>;
template class MLP<float, megatron::Split1D>;
template class MLP<double, megatron::Split1D>;

}  // namespace optimus

// MLP2D: two Linear2D around a GELU.
#include "optimus/layers/mlp.hpp"

#include "block_logic.hpp"

namespace optimus {

template <class T>
MLP2D<T>::MLP2D(const Grid& grid, const std::string& name, std::int64_t hidden, std::int64_t ffn)
    : MLP2D(grid, ParameterTags::of(grid), name, hidden, ffn) {}

template <class T>
MLP2D<T>::MLP2D(const Grid& grid, const ParameterTags& tags, const std::string& name, std::int64_t hidden,
                std::int64_t ffn)
    : MLP2D(grid, tags, name, hidden, ffn, MlpKind::gelu, true) {}

template <class T>
MLP2D<T>::MLP2D(const Grid& grid, const ParameterTags& tags, const std::string& name, std::int64_t hidden,
                std::int64_t ffn, MlpKind kind, bool bias)
    : kind_(kind),
      c_fc_(grid, tags, name + ".c_fc", hidden, fc_width(kind, ffn), fc_columns(kind, ffn), bias),
      c_proj_(grid, tags, name + ".c_proj", ffn, hidden, FusedColumns{}, bias) {}

template <class T>
DistMatrix<T> MLP2D<T>::forward(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  return detail::mlp_forward<T>(c_fc_, c_proj_, kind_, x, pass, saved);
}

template <class T>
DistMatrix<T> MLP2D<T>::forward(SavedActivation<T> x, const Pass& pass, Context& saved) {
  return detail::mlp_forward<T>(c_fc_, c_proj_, kind_, std::move(x), pass, saved);
}

template <class T>
DistMatrix<T> MLP2D<T>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  return detail::mlp_backward<T>(c_fc_, c_proj_, kind_, std::move(saved), dy, later);
}

template <class T>
DistMatrix<T> MLP2D<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T>
DistMatrix<T> MLP2D<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template <class T>
void MLP2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  c_fc_.parameters(out);
  c_proj_.parameters(out);
}

template <class T>
void MLP2D<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  c_fc_.parameter_storage(out);
  c_proj_.parameter_storage(out);
}

template <class T>
void MLP2D<T>::zero_grad() {
  c_fc_.zero_grad();
  c_proj_.zero_grad();
}

template class MLP2D<float>;
template class MLP2D<double>;

}  // namespace optimus

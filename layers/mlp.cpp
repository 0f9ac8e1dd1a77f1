// MLP2D: two Linear2D around a GELU.
#include "optimus/layers/mlp.hpp"

#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus {

template <class T>
MLP2D<T>::MLP2D(const Grid& grid, const std::string& name, std::int64_t hidden, std::int64_t ffn)
    : c_fc_(grid, name + ".c_fc", hidden, ffn), c_proj_(grid, name + ".c_proj", ffn, hidden) {}

template <class T>
DistMatrix<T> MLP2D<T>::forward(const DistMatrix<T>& x, const Pass& pass) {
  DistMatrix<T> pre = c_fc_.forward(x, pass);
  DistMatrix<T> act(pre.grid(), pre.rows(), pre.cols());
  cpu::gelu_forward<T>(pre.local(), act.local());
  DistMatrix<T> y = c_proj_.forward(act, pass);
  if (pass.training) pre_ = pre.clone_as(MemoryKind::activations);
  return y;
}

template <class T>
DistMatrix<T> MLP2D<T>::backward(const DistMatrix<T>& dy) {
  OPTIMUS_CHECK(pre_.has_value(), "mlp: backward without a training forward");
  DistMatrix<T> dact = c_proj_.backward(dy);
  cpu::gelu_backward<T>(pre_->local(), dact.local(), dact.local());
  pre_.reset();
  return c_fc_.backward(dact);
}

template <class T>
void MLP2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  c_fc_.parameters(out);
  c_proj_.parameters(out);
}

template <class T>
void MLP2D<T>::zero_grad() {
  c_fc_.zero_grad();
  c_proj_.zero_grad();
}

template class MLP2D<float>;
template class MLP2D<double>;

}  // namespace optimus

// TransformerBlock2D: pre-LayerNorm residual block.
#include "optimus/layers/block.hpp"

#include "optimus/core/kernels.hpp"

namespace optimus {
namespace {
std::string prefix(std::int64_t layer) { return "h." + std::to_string(layer) + "."; }
}  // namespace

template <class T>
TransformerBlock2D<T>::TransformerBlock2D(const Grid& grid, const GptConfig& config, std::int64_t layer)
    : config_(config),
      layer_(layer),
      ln_1_(grid, prefix(layer) + "ln_1", config.hidden),
      attn_(grid, prefix(layer) + "attn", config.hidden, config.heads, DropoutSpec{config.dropout, config.seed, layer}),
      ln_2_(grid, prefix(layer) + "ln_2", config.hidden),
      mlp_(grid, prefix(layer) + "mlp", config.hidden, config.ffn) {}

template <class T>
DistMatrix<T> TransformerBlock2D<T>::forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass) {
  const double p = pass.training ? config_.dropout : 0.0;
  const auto layer = static_cast<std::uint64_t>(layer_);
  DistMatrix<T> a = attn_.forward(ln_1_.forward(x, pass), seq, pass);
  apply_dropout(a, p, config_.seed, dropout_stream(pass.step, layer, DropoutSite::attention_residual));
  cpu::axpby<T>(T(1), x.local(), T(1), a.local());  // a = x1
  DistMatrix<T> m = mlp_.forward(ln_2_.forward(a, pass), pass);
  apply_dropout(m, p, config_.seed, dropout_stream(pass.step, layer, DropoutSite::mlp_residual));
  cpu::axpby<T>(T(1), a.local(), T(1), m.local());  // m = y
  step_ = pass.step;
  return m;
}

template <class T>
DistMatrix<T> TransformerBlock2D<T>::backward(const DistMatrix<T>& dy) {
  const auto layer = static_cast<std::uint64_t>(layer_);
  DistMatrix<T> d = dy.clone();
  apply_dropout(d, config_.dropout, config_.seed, dropout_stream(step_, layer, DropoutSite::mlp_residual));
  DistMatrix<T> dx1 = ln_2_.backward(mlp_.backward(d));
  cpu::axpby<T>(T(1), dy.local(), T(1), dx1.local());
  d = dx1.clone();
  apply_dropout(d, config_.dropout, config_.seed, dropout_stream(step_, layer, DropoutSite::attention_residual));
  DistMatrix<T> dx = ln_1_.backward(attn_.backward(d));
  cpu::axpby<T>(T(1), dx1.local(), T(1), dx.local());
  return dx;
}

template <class T>
void TransformerBlock2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  ln_1_.parameters(out);
  attn_.parameters(out);
  ln_2_.parameters(out);
  mlp_.parameters(out);
}

template <class T>
void TransformerBlock2D<T>::zero_grad() {
  ln_1_.zero_grad();
  attn_.zero_grad();
  ln_2_.zero_grad();
  mlp_.zero_grad();
}

template class TransformerBlock2D<float>;
template class TransformerBlock2D<double>;

}  // namespace optimus

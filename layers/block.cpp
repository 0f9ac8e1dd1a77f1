// TransformerBlock2D: pre-LayerNorm residual block.
#include "optimus/layers/block.hpp"

#include "block_logic.hpp"

namespace optimus {
namespace {
std::string prefix(std::int64_t layer) { return "h." + std::to_string(layer) + "."; }
}  // namespace

template <class T>
TransformerBlock2D<T>::TransformerBlock2D(const Grid& grid, const GptConfig& config, std::int64_t layer)
    : TransformerBlock2D(grid, ParameterTags::of(grid), config, layer) {}

template <class T>
TransformerBlock2D<T>::TransformerBlock2D(const Grid& grid, const ParameterTags& tags, const GptConfig& config,
                                          std::int64_t layer)
    : config_(config),
      layer_(layer),
      ln_1_(grid, tags, prefix(layer) + "ln_1", config.hidden, config.block.norm),
      attn_(grid, tags, prefix(layer) + "attn", AttentionSpec::of(config, layer)),
      ln_2_(grid, tags, prefix(layer) + "ln_2", config.hidden, config.block.norm),
      mlp_(grid, tags, prefix(layer) + "mlp", config.hidden, config.ffn, config.block.mlp, config.block.bias) {}

template <class T>
DistMatrix<T> TransformerBlock2D<T>::forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass,
                                             Context& saved) {
  return detail::block_forward<T>(detail::BlockParts{ln_1_, attn_, ln_2_, mlp_, config_, layer_}, x, seq, pass,
                                  recompute_, saved);
}

template <class T>
DistMatrix<T> TransformerBlock2D<T>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  return detail::block_backward<T>(detail::BlockParts{ln_1_, attn_, ln_2_, mlp_, config_, layer_}, std::move(saved),
                                   dy, later);
}

template <class T>
DistMatrix<T> TransformerBlock2D<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T>
DistMatrix<T> TransformerBlock2D<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template <class T>
void TransformerBlock2D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  ln_1_.parameters(out);
  attn_.parameters(out);
  ln_2_.parameters(out);
  mlp_.parameters(out);
}

template <class T>
void TransformerBlock2D<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  ln_1_.parameter_storage(out);
  attn_.parameter_storage(out);
  ln_2_.parameter_storage(out);
  mlp_.parameter_storage(out);
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

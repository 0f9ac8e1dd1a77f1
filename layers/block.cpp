// TransformerBlock<T, Split>: the pre-LayerNorm residual block, for both splits (TransformerBlock2D,
// megatron::TransformerBlock1D); the work is in block_logic.hpp.
#include "optimus/layers/block.hpp"

#include "optimus/layers/megatron/block.hpp"

#include "block_logic.hpp"

namespace optimus {
namespace {
std::string prefix(std::int64_t layer) { return "h." + std::to_string(layer) + "."; }
}  // namespace

template <class T, class Split>
TransformerBlock<T, Split>::TransformerBlock(const Place& place, const GptConfig& config, std::int64_t layer)
    : TransformerBlock(place, Split::tags_of(place), config, layer) {}

template <class T, class Split>
TransformerBlock<T, Split>::TransformerBlock(const Place& place, const ParameterTags& tags, const GptConfig& config,
                                             std::int64_t layer)
    : place_(place),
      config_(config),
      layer_(layer),
      ln_1_(Split::activation_grid(place), tags, prefix(layer) + "ln_1", config.hidden, config.block.norm),
      attn_(place, tags, prefix(layer) + "attn", AttentionSpec::of(config, layer)),
      ln_2_(Split::activation_grid(place), tags, prefix(layer) + "ln_2", config.hidden, config.block.norm),
      mlp_(place, tags, prefix(layer) + "mlp", config.hidden, config.ffn, config.block.mlp, config.block.bias) {}

template <class T, class Split>
DistMatrix<T> TransformerBlock<T, Split>::forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass,
                                             Context& saved) {
  return detail::block_forward<T>(detail::BlockParts{ln_1_, attn_, ln_2_, mlp_, config_, layer_}, x, seq, pass,
                                  recompute_, saved);
}

template <class T, class Split>
DistMatrix<T> TransformerBlock<T, Split>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  return detail::block_backward<T>(detail::BlockParts{ln_1_, attn_, ln_2_, mlp_, config_, layer_}, std::move(saved),
                                   dy, later);
}

template <class T, class Split>
DistMatrix<T> TransformerBlock<T, Split>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T, class Split>
DistMatrix<T> TransformerBlock<T, Split>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template <class T, class Split>
void TransformerBlock<T, Split>::parameters(std::vector<ParameterRef<T>>& out) {
  const std::size_t first = out.size();
  Sublayers<T, TransformerBlock>::parameters(out);
  Split::relabel_norms(place_, out, first);
}

template class TransformerBlock<float, Split2D>;
template class TransformerBlock<double, Split2D>;
template class TransformerBlock<float, megatron::Split1D>;
template class TransformerBlock<double, megatron::Split1D>;

}  // namespace optimus

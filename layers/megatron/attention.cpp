// The 1D baseline's attention, MLP and transformer block.
#include "optimus/layers/megatron/block.hpp"

#include <utility>

#include "../attention_core.hpp"
#include "../block_logic.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus::megatron {
namespace {

detail::AttentionGeometry geometry(const Group& group, const AttentionSpec& spec, std::int64_t rows, std::int64_t seq,
                                   const Pass& pass, double dropout) {
  detail::AttentionGeometry g;
  g.seq = seq;
  g.batches = rows / seq;
  g.heads = spec.heads / group.size();
  g.kv_heads = spec.kv_heads / group.size();
  g.head_size = spec.hidden / spec.heads;
  g.first_batch = pass.first_sequence;
  g.first_head = group.rank() * g.heads;
  g.total_heads = spec.heads;
  g.dropout = dropout;
  g.rng = CounterRng(spec.dropout.seed, dropout_stream(pass.step, static_cast<std::uint64_t>(spec.dropout.layer),
                                                       DropoutSite::attention_probs));
  g.rope = spec.rope;
  return g;
}


}  // namespace

template <class T>
Attention1D<T>::Attention1D(const Group& group, const ParameterTags& tags, const std::string& name,
                            const AttentionSpec& spec)
    : group_(group),
      spec_(checked(spec, group.size(), name)),
      c_attn_(group, tags, name + ".c_attn", spec_.hidden, spec_.qkv_parts().total(), spec_.qkv_parts(), spec_.bias),
      c_proj_(group, tags, name + ".c_proj", spec_.hidden, spec_.hidden, spec_.bias) {}

template <class T>
DistMatrix<T> Attention1D<T>::forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass, Context& saved) {
  OPTIMUS_CHECK(seq > 0 && x.rows() % seq == 0, "attention: ", x.rows(), " tokens are not whole sequences of ", seq);
  const auto g = geometry(group_, spec_, x.rows(), seq, pass, pass.training ? spec_.dropout.p : 0.0);
  return detail::attention_forward<T>(c_attn_, c_proj_, x, spec_.hidden / group_.size(), g, pass, saved);
}

template <class T>
DistMatrix<T> Attention1D<T>::forward(SavedActivation<T> x, std::int64_t seq, const Pass& pass, Context& saved) {
  OPTIMUS_CHECK(seq > 0 && x.rows() % seq == 0, "attention: ", x.rows(), " tokens are not whole sequences of ", seq);
  const auto g = geometry(group_, spec_, x.rows(), seq, pass, pass.training ? spec_.dropout.p : 0.0);
  return detail::attention_forward<T>(c_attn_, c_proj_, std::move(x), spec_.hidden / group_.size(), g, pass, saved);
}

template <class T>
DistMatrix<T> Attention1D<T>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  saved.mark.check(group_.local(), "attention");
  const auto g = geometry(group_, spec_, saved.qkv->rows(), saved.seq, saved.pass, spec_.dropout.p);
  return detail::attention_backward<T>(c_attn_, c_proj_, std::move(saved), dy, g, later);
}

template <class T>
DistMatrix<T> Attention1D<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T>
DistMatrix<T> Attention1D<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template <class T>
void Attention1D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  c_attn_.parameters(out);
  c_proj_.parameters(out);
}

template <class T>
void Attention1D<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  c_attn_.parameter_storage(out);
  c_proj_.parameter_storage(out);
}

template <class T>
void Attention1D<T>::zero_grad() {
  c_attn_.zero_grad();
  c_proj_.zero_grad();
}

template <class T>
MLP1D<T>::MLP1D(const Group& group, const ParameterTags& tags, const std::string& name, std::int64_t hidden,
                std::int64_t ffn, MlpKind kind, bool bias)
    : kind_(kind),
      c_fc_(group, tags, name + ".c_fc", hidden, fc_width(kind, ffn), fc_columns(kind, ffn), bias),
      c_proj_(group, tags, name + ".c_proj", ffn, hidden, bias) {}

template <class T>
DistMatrix<T> MLP1D<T>::forward(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  return detail::mlp_forward<T>(c_fc_, c_proj_, kind_, x, pass, saved);
}

template <class T>
DistMatrix<T> MLP1D<T>::forward(SavedActivation<T> x, const Pass& pass, Context& saved) {
  return detail::mlp_forward<T>(c_fc_, c_proj_, kind_, std::move(x), pass, saved);
}

template <class T>
DistMatrix<T> MLP1D<T>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  return detail::mlp_backward<T>(c_fc_, c_proj_, kind_, std::move(saved), dy, later);
}

template <class T>
DistMatrix<T> MLP1D<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T>
DistMatrix<T> MLP1D<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template <class T>
void MLP1D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  c_fc_.parameters(out);
  c_proj_.parameters(out);
}

template <class T>
void MLP1D<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  c_fc_.parameter_storage(out);
  c_proj_.parameter_storage(out);
}

template <class T>
void MLP1D<T>::zero_grad() {
  c_fc_.zero_grad();
  c_proj_.zero_grad();
}

namespace {
std::string prefix(std::int64_t layer) { return "h." + std::to_string(layer) + "."; }
}  // namespace

template <class T>
TransformerBlock1D<T>::TransformerBlock1D(const Group& group, const GptConfig& config, std::int64_t layer)
    : TransformerBlock1D(group, ParameterTags::of(group.local()), config, layer) {}

template <class T>
TransformerBlock1D<T>::TransformerBlock1D(const Group& group, const ParameterTags& tags, const GptConfig& config,
                                          std::int64_t layer)
    : config_(config),
      layer_(layer),
      ln_1_(group.local(), tags, prefix(layer) + "ln_1", config.hidden, config.block.norm),
      attn_(group, tags, prefix(layer) + "attn", AttentionSpec::of(config, layer)),
      ln_2_(group.local(), tags, prefix(layer) + "ln_2", config.hidden, config.block.norm),
      mlp_(group, tags, prefix(layer) + "mlp", config.hidden, config.ffn, config.block.mlp, config.block.bias) {}

template <class T>
DistMatrix<T> TransformerBlock1D<T>::forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass,
                                             Context& saved) {
  return detail::block_forward<T>(detail::BlockParts{ln_1_, attn_, ln_2_, mlp_, config_, layer_}, x, seq, pass,
                                  recompute_, saved);
}

template <class T>
DistMatrix<T> TransformerBlock1D<T>::backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  return detail::block_backward<T>(detail::BlockParts{ln_1_, attn_, ln_2_, mlp_, config_, layer_}, std::move(saved),
                                   dy, later);
}

template <class T>
DistMatrix<T> TransformerBlock1D<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_split(std::move(saved), dy, nullptr);
}

template <class T>
DistMatrix<T> TransformerBlock1D<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_split(std::move(saved), dy, &later);
}

template <class T>
void TransformerBlock1D<T>::parameters(std::vector<ParameterRef<T>>& out) {
  std::vector<ParameterRef<T>> ln;
  ln_1_.parameters(ln);
  attn_.parameters(ln);
  ln_2_.parameters(ln);
  mlp_.parameters(ln);
  for (ParameterRef<T>& p : ln) {
    // LayerNorm on the one-rank grid holds everything: it is replicated over the group.
    if (p.layout.kind == ShardLayout::Kind::vector) {
      p.layout = ShardLayout{.kind = ShardLayout::Kind::replicated, .q = 1, .i = 0, .j = 0, .rows = 1,
                             .cols = p.layout.cols, .fused = {}, .parts = 1, .part = 0, .padding_rows = 0};
    }
    out.push_back(p);
  }
}

template <class T>
void TransformerBlock1D<T>::parameter_storage(std::vector<ParameterStorage<T>>& out) {
  ln_1_.parameter_storage(out);
  attn_.parameter_storage(out);
  ln_2_.parameter_storage(out);
  mlp_.parameter_storage(out);
}

template <class T>
void TransformerBlock1D<T>::zero_grad() {
  ln_1_.zero_grad();
  attn_.zero_grad();
  ln_2_.zero_grad();
  mlp_.zero_grad();
}

template class Attention1D<float>;
template class Attention1D<double>;
template class MLP1D<float>;
template class MLP1D<double>;
template class TransformerBlock1D<float>;
template class TransformerBlock1D<double>;

}  // namespace optimus::megatron

// Multi-head attention (causal or bidirectional) on a local block (see attention_core.hpp).
#include "attention_core.hpp"

#include <type_traits>

#include "optimus/core/ops.hpp"

namespace optimus::detail {
namespace {

// The kernels' view of the geometry; `lengths` its sequences' lengths where the attention's memory is (lengths_on),
// or absent.
ops::AttentionShape shape_of(const AttentionGeometry& g, TensorView<const int> lengths) {
  return ops::AttentionShape{.seq = g.seq,
                             .heads = g.heads,
                             .dropout = g.dropout,
                             .seed = g.rng.seed(),
                             .stream = g.rng.stream(),
                             .first_batch = g.first_batch,
                             .first_head = g.first_head,
                             .total_heads = g.total_heads,
                             .causal = g.causal,
                             .lengths = lengths};
}

// The geometry's lengths on the grid's memory, kept in `storage`; absent where none are padded.
TensorView<const int> lengths_on(const AttentionGeometry& g, const Grid& grid, Tensor<int>& storage) {
  if (g.lengths.empty()) return {};
  storage = upload(g.lengths.data(), Shape{static_cast<std::int64_t>(g.lengths.size())},
                   grid.tag(MemoryKind::workspace));
  return storage.view();
}

}  // namespace

template <class T>
void attention_core_forward(const AttentionGeometry& g, const Grid& grid, const SavedActivation<T>& qkv,
                            TensorView<T> lse, SavedActivation<T>& merged) {
  Tensor<int> storage;
  const TensorView<const int> lengths = lengths_on(g, grid, storage);
  Tensor<T> scratch;  // the log-sum-exps nobody keeps (inference)
  if (lse.data() == nullptr) {
    scratch = Tensor<T>(Shape{g.batches * g.heads * g.seq}, grid.tag(MemoryKind::workspace), Init::none);
    lse = scratch.view();
  }
  if constexpr (std::is_same_v<T, float>) {
    if (qkv.is_bf16() && merged.is_bf16()) {  // mixed precision: qkv read as kept
      ops::flash_attention_forward(qkv.bf16_block(), shape_of(g, lengths), merged.bf16_storage().view(), lse, grid.queue());
      return;
    }
  }
  Tensor<T> widened;  // qkv in T where kept in bf16 (not both kept so)
  const TensorView<const T> x = qkv.values(widened);
  if constexpr (std::is_same_v<T, float>) {
    if (merged.is_bf16()) {
      ops::flash_attention_forward(x, shape_of(g, lengths), merged.bf16_storage().view(), lse, grid.queue());
      return;
    }
  }
  ops::flash_attention_forward<T>(x, shape_of(g, lengths), merged.storage().view(), lse, grid.queue());
}

template <class T>
Tensor<T> attention_core_delta(const AttentionGeometry& g, const Grid& grid, TensorView<const T> merged,
                               TensorView<const bf16> merged16, TensorView<const T> dmerged) {
  Tensor<T> delta(Shape{g.batches * g.heads * g.seq}, grid.tag(MemoryKind::workspace), Init::none);
  if constexpr (std::is_same_v<T, float>) {
    if (merged16.data() != nullptr) {
      ops::attention_delta(merged16, dmerged, shape_of(g, {}), delta.view(), grid.queue());
      return delta;
    }
  }
  ops::attention_delta<T>(merged, dmerged, shape_of(g, {}), delta.view(), grid.queue());
  return delta;
}

template <class T>
void attention_core_backward(const AttentionGeometry& g, const Grid& grid, const SavedActivation<T>& qkv,
                             TensorView<const T> lse, TensorView<const T> delta, TensorView<const T> dmerged,
                             TensorView<T> dqkv) {
  Tensor<int> storage;
  const TensorView<const int> lengths = lengths_on(g, grid, storage);
  if constexpr (std::is_same_v<T, float>) {
    if (qkv.is_bf16()) {
      ops::flash_attention_backward(qkv.bf16_block(), dmerged, lse, delta, shape_of(g, lengths), dqkv, grid.queue());
      return;
    }
  }
  ops::flash_attention_backward<T>(qkv.block(), dmerged, lse, delta, shape_of(g, lengths), dqkv, grid.queue());
}

#define OPTIMUS_INSTANTIATE(T)                                                                                  \
  template void attention_core_forward<T>(const AttentionGeometry&, const Grid&, const SavedActivation<T>&,  \
                                          TensorView<T>, SavedActivation<T>&);                                   \
  template Tensor<T> attention_core_delta<T>(const AttentionGeometry&, const Grid&, TensorView<const T>,      \
                                             TensorView<const bf16>, TensorView<const T>);                       \
  template void attention_core_backward<T>(const AttentionGeometry&, const Grid&, const SavedActivation<T>&, \
                                           TensorView<const T>, TensorView<const T>, TensorView<const T>,        \
                                           TensorView<T>);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::detail

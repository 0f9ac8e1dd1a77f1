// megatron::Split1D: the 1D baseline's split of a layer's work over the p ranks of a Group, for the layer shells
// written once (optimus/layers/split.hpp): c_fc and c_attn column-parallel, c_proj row-parallel (all-reduced),
// LayerNorms on the group's one-rank grid, whole on every rank; Megatron's vocabulary-parallel embedding and
// cross-entropy (wte's rows split over the group).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/layers/megatron/group.hpp"
#include "optimus/layers/megatron/linear.hpp"
#include "optimus/layers/weight_copy.hpp"

namespace optimus::megatron {

struct Split1D {
  using Place = Group;
  template <class T>
  using ColumnLinear = ColumnParallelLinear<T>;
  template <class T>
  using RowLinear = RowParallelLinear<T>;

  // Activations [N, h] and LayerNorms: whole, on the group's one-rank grid; parameters live there when no tags say.
  static const Grid& activation_grid(const Group& group) { return group.local(); }
  static ParameterTags tags_of(const Group& group) { return ParameterTags::of(group.local()); }
  // Heads split over the group's p ranks, rank r holding block r; the merged heads are this rank's h/p columns.
  static int head_parts(const Group& group) { return group.size(); }
  static int head_block(const Group& group) { return group.rank(); }
  static std::int64_t heads_width(const Group& group, std::int64_t hidden) { return hidden / group.size(); }
  template <class T>
  static RowParallelLinear<T> row_linear(const Group& group, const ParameterTags& tags, const std::string& name,
                                         std::int64_t in, std::int64_t out, bool bias) {
    return RowParallelLinear<T>(group, tags, name, in, out, bias);
  }
  // The LayerNorms among params[from ..] (vectors of the one-rank grid) are replicated over the group.
  template <class T>
  static void relabel_norms(const Group& group, std::vector<ParameterRef<T>>& params, std::size_t from) {
    for (std::size_t k = from; k < params.size(); ++k) {
      Sharding& l = params[k].layout;
      if (l.kind == Sharding::Kind::vector) l = Sharding::replicated(1, l.cols, group.size(), group.rank());
    }
  }

  // The vocabulary-parallel work (layers/megatron/split.cpp), as Split2D's says. wte [V, h] split by rows over the
  // group (rank r: ids [r V/p, (r+1) V/p)), V the stored, padded vocabulary (GptConfig::stored_vocab(p)); wpe
  // [max_seq, h] whole on every rank; activations [N, h] whole; logits: this rank's slice [N, V/p], all on the group's
  // one-rank grid.
  // wte's rows here (V/p: throws unless p divides V), and the layouts of wte (and lm_head) and of wpe (replicated).
  static std::int64_t vocab_rows(const Group& group, const GptConfig& config);
  // BERT's head bias: this rank's vocabulary slice of it (V/p, on the one-rank grid), and its layout (columns over the
  // group, the ids from `vocab` on padding).
  static std::int64_t head_bias_size(const Group& group, const GptConfig& config) { return vocab_rows(group, config); }
  static Sharding head_bias_layout(const Group& group, std::int64_t vocab, std::int64_t size);
  static Sharding vocabulary_layout(const Group& group, const GptConfig& config);
  static Sharding table_layout(const Group& group, std::int64_t rows, std::int64_t cols) {
    return Sharding::replicated(rows, cols, group.size(), group.rank());
  }
  static std::int64_t vocab_offset(const Group& group, std::int64_t /*offset*/, std::int64_t extent) {
    return group.rank() * extent;
  }
  // None: the 1D baseline casts its weights per product, as its linears do.
  template <class T>
  static std::unique_ptr<WeightCopy> head_copy(const Group& /*group*/, const DistMatrix<T>& /*weight*/) {
    return nullptr;
  }
  // x [n, h]: this slice's lookups (zero rows for ids outside it), all-reduced over the group (one slice holds each
  // id: the sum is exact).
  template <class T>
  static DistMatrix<T> look_up(const Group& group, const DistMatrix<T>& wte, TensorView<const int> ids,
                               std::int64_t hidden);
  template <class T>
  static void add_positions(const Group& group, const DistMatrix<T>& wpe, std::int64_t seq, DistMatrix<T>& x);
  // dwte += dx's rows of this slice's ids, and dwpe += dx's rows per position: no communication (dx is whole).
  template <class T>
  static void add_lookup_gradient(const Group& group, const DistMatrix<T>& dx, TensorView<const int> ids,
                                  DistMatrix<T>& dwte);
  template <class T>
  static void add_position_gradient(const Group& group, const DistMatrix<T>& dx, std::int64_t seq,
                                    DistMatrix<T>& dwpe);
  // This slice's logits x w_r^T [N, V/p], a local product.
  template <class T>
  static DistMatrix<T> logits(const Group& group, const SummaOperand<T>& x, const SummaOperand<T>& w,
                              std::int64_t vocab);
  // Inference: every rank gets the whole logits [N, p V/p], the slices all-gathered over the group in rank order.
  template <class T>
  static DistMatrix<T> whole_logits(const Group& group, DistMatrix<T> logits);
  static Communicator& vocab_owners(const Group& group) { return group.tp(); }
  static double sum_over_rows(const Group& /*group*/, double value) { return value; }  // every rank has every row
  // dx = dlogits_r w_r, all-reduced over the group; dw_r += dlogits_r^T x, no communication.
  template <class T>
  static DistMatrix<T> input_gradient(const Group& group, const SavedActivation<T>& dlogits, const SummaOperand<T>& w);
  template <class T>
  static void add_weight_gradient(const Group& group, const SavedActivation<T>& dlogits, const SavedActivation<T>& x,
                                  DistMatrix<T>& dw);
};

}  // namespace optimus::megatron

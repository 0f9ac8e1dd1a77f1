// megatron::Split1D: the 1D baseline's split of a layer's work over the p ranks of a Group, for the layer shells
// written once (optimus/layers/split.hpp): c_fc and c_attn column-parallel, c_proj row-parallel (all-reduced),
// LayerNorms on the group's one-rank grid, whole on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "optimus/layers/megatron/group.hpp"
#include "optimus/layers/megatron/linear.hpp"

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
      ShardLayout& l = params[k].layout;
      if (l.kind == ShardLayout::Kind::vector) l = ShardLayout::replicated(1, l.cols, group.size(), group.rank());
    }
  }
};

}  // namespace optimus::megatron

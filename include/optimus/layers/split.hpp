// How a layer's work is split over ranks, for the layers written once (Attention, MLP, TransformerBlock): Split2D
// splits it into the q x q grid's blocks (Linear2D; activations and LayerNorms on the grid); megatron::Split1D
// (optimus/layers/megatron/split.hpp) into the 1D baseline's p shards of a Group (column- and row-parallel linears;
// activations and LayerNorms whole on every rank). A split names its place, its linears, and the few choices that
// differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "optimus/layers/linear.hpp"

namespace optimus {

struct Split2D {
  using Place = Grid;
  template <class T>
  using ColumnLinear = Linear2D<T>;
  template <class T>
  using RowLinear = Linear2D<T>;

  // The grid activations [N, h] and LayerNorms live on, and where parameters live when no tags say.
  static const Grid& activation_grid(const Grid& grid) { return grid; }
  static ParameterTags tags_of(const Grid& grid) { return ParameterTags::of(grid); }
  // The ranks heads are split over (a grid row's q), this rank's block of them, and the columns of the attention's
  // merged heads as a matrix on the activation grid (all h: grid column j holds its heads' columns).
  static int head_parts(const Grid& grid) { return grid.q(); }
  static int head_block(const Grid& grid) { return grid.col_index(); }
  static std::int64_t heads_width(const Grid& /*grid*/, std::int64_t hidden) { return hidden; }
  // An [in -> out] linear whose input is split as c_fc's output is (the MLP's c_proj).
  template <class T>
  static Linear2D<T> row_linear(const Grid& grid, const ParameterTags& tags, const std::string& name, std::int64_t in,
                                std::int64_t out, bool bias) {
    return Linear2D<T>(grid, tags, name, in, out, FusedColumns{}, bias);
  }
  // The layouts of a block's parameters params[from ..] as the layers give them (blocks and vectors of the grid).
  template <class T>
  static void relabel_norms(const Grid& /*grid*/, std::vector<ParameterRef<T>>& /*params*/, std::size_t /*from*/) {}
};

}  // namespace optimus

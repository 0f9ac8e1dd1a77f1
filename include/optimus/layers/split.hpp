// How a layer's work is split over ranks, for the layers written once (Attention, MLP, TransformerBlock, Embedding,
// LmHead): Split2D splits it into the q x q grid's blocks (Linear2D; activations and LayerNorms on the grid);
// megatron::Split1D (optimus/layers/megatron/split.hpp) into the 1D baseline's p shards of a Group (column- and
// row-parallel linears; activations and LayerNorms whole on every rank). A split names its place, its linears, the few
// choices that differ, and the vocabulary-parallel work of the embedding and the LM head (its collectives).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/layers/linear.hpp"
#include "optimus/layers/weight_copy.hpp"

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

  // The vocabulary-parallel work (layers/split.cpp). wte [V, h] (V the stored, padded vocabulary) in the grid's blocks:
  // rank (i, j) holds vocabulary slice i, feature block j; wpe [max_seq, h] likewise; logits [N, V]: rank (i, j) holds
  // tokens block i, vocabulary slice j.
  // wte's rows as a matrix of the grid (all V), and the layouts of wte (and lm_head) and of wpe.
  static std::int64_t vocab_rows(const Grid& grid, const GptConfig& config);
  static Sharding vocabulary_layout(const Grid& grid, const GptConfig& config);
  static Sharding table_layout(const Grid& grid, std::int64_t rows, std::int64_t cols);
  // BERT's head bias over the stored vocabulary: a vector of the grid (all V: q^2 divides it, validate_for_grid), and
  // its layout, the ids from `vocab` on padding.
  static std::int64_t head_bias_size(const Grid& grid, const GptConfig& config) { return vocab_rows(grid, config); }
  static Sharding head_bias_layout(const Grid& grid, std::int64_t vocab, std::int64_t size);
  // The first id of this rank's vocabulary slice, a matrix's whose block starts at `offset` (wte's rows, the logits'
  // columns) and spans `extent` ids.
  static std::int64_t vocab_offset(const Grid& /*grid*/, std::int64_t offset, std::int64_t /*extent*/) { return offset; }
  // The LM head's weight as its products take it under mixed precision (a bf16 copy, weight_copy.hpp), or null.
  template <class T>
  static std::unique_ptr<WeightCopy> head_copy(const Grid& grid, const DistMatrix<T>& weight) {
    return weight_copy_for(grid, weight, grid.tag(MemoryKind::parameters));
  }
  // x [n, h]: the lookups of `ids` (n) in every rank's vocabulary slice, summed: reduce-scattered along the column.
  template <class T>
  static DistMatrix<T> look_up(const Grid& grid, const DistMatrix<T>& wte, TensorView<const int> ids,
                               std::int64_t hidden);
  // x += wpe's rows of x's positions (sequences of `seq`), wpe's column block all-gathered along the column.
  template <class T>
  static void add_positions(const Grid& grid, const DistMatrix<T>& wpe, std::int64_t seq, DistMatrix<T>& x);
  // dwte += dx's rows of this slice's ids: dx's column block all-gathered along the column, then scattered.
  template <class T>
  static void add_lookup_gradient(const Grid& grid, const DistMatrix<T>& dx, TensorView<const int> ids,
                                  DistMatrix<T>& dwte);
  // dwpe += dx's rows summed per position, reduce-scattered along the column.
  template <class T>
  static void add_position_gradient(const Grid& grid, const DistMatrix<T>& dx, std::int64_t seq, DistMatrix<T>& dwpe);
  // This rank's logits x w^T [N, V] (SUMMA ABT) as workspace; throws unless w's V rows hold all `vocab` ids.
  template <class T>
  static DistMatrix<T> logits(const Grid& grid, const SummaOperand<T>& x, const SummaOperand<T>& w,
                              std::int64_t vocab);
  // The logits as inference returns them: the grid's blocks as they are.
  template <class T>
  static DistMatrix<T> whole_logits(const Grid& /*grid*/, DistMatrix<T> logits) { return logits; }
  // The ranks that hold the other vocabulary slices of this rank's logit rows (a grid row), and the sum of a number
  // over the ranks holding the other rows (a grid column).
  static Communicator& vocab_owners(const Grid& grid) { return grid.row(); }
  static double sum_over_rows(const Grid& grid, double value);
  // dx = dlogits w (SUMMA AB), and dw += dlogits^T x (SUMMA ATB).
  template <class T>
  static DistMatrix<T> input_gradient(const Grid& grid, const SavedActivation<T>& dlogits, const SummaOperand<T>& w);
  template <class T>
  static void add_weight_gradient(const Grid& grid, const SavedActivation<T>& dlogits, const SavedActivation<T>& x,
                                  DistMatrix<T>& dw);
};

}  // namespace optimus

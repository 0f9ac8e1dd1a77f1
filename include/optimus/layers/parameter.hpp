// Parameters of the 2D layers, described in GPT-2 terms: every layer lists, for each of its tensors, the
// GPT-2 name, the global shape, this rank's local values and gradients, and a Sharding that says where
// each local element sits in the global tensor. Initialization, loading full tensors and gathering them
// back are written once, on top of that description (parameter.cpp).
#pragma once

#include <Eigen/Core>
#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/core/ops.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/grid.hpp"
#include "optimus/layers/weight_copy.hpp"

namespace optimus {

using GlobalMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// A weight whose columns are two or three matrices side by side in the GPT-2 tensor — c_attn's [Q | K | V] (widths h,
// kv d, kv d), SwiGLU's c_fc [gate | up] (ffn, ffn) — stored grouped: column group g (of q in the 2D layout, `parts`
// in the 1D one) holds slice g of each part in turn, [Q_g | K_g | V_g], so that a rank's columns hold whole heads of
// all three (or matching gate and up columns). All widths 0: the columns are stored in order.
struct FusedColumns {
  std::array<std::int64_t, 3> widths{};  // the parts' global widths; an unused part is 0
  bool fused() const { return widths[0] > 0; }
  std::int64_t total() const { return widths[0] + widths[1] + widths[2]; }
  // The stored (internal) column -> the GPT-2 tensor's, with the columns split in `groups`.
  std::int64_t original_column(std::int64_t internal, std::int64_t groups) const;
  friend bool operator==(const FusedColumns&, const FusedColumns&) = default;
};
// c_fc's columns for an MLP of `kind`: SwiGLU's [gate | up] fused (ffn each), GELU's in order.
inline FusedColumns fc_columns(MlpKind kind, std::int64_t ffn) {
  return kind == MlpKind::swiglu ? FusedColumns{{ffn, ffn, 0}} : FusedColumns{};
}

// Where local element (lr, lc) lives in a rows x cols GPT-2 tensor (vectors: rows = 1).
//   block     : rank (i, j) of a q x q grid holds block (i, j)                     (2D matrices)
//   vector    : rank (i, j) holds piece i of column block j, cols/q^2 elements     (2D biases, LayerNorm)
//   columns   : rank `part` of `parts` holds columns [part*cols/parts, ...)        (1D column-parallel)
//   rows      : rank `part` of `parts` holds rows [part*rows/parts, ...)           (1D row-parallel)
//   replicated: every rank holds everything                                        (1D LayerNorm, biases)
struct Sharding {
  enum class Kind { block, vector, columns, rows, replicated };
  Kind kind = Kind::block;
  int q = 1, i = 0, j = 0;
  std::int64_t rows = 0, cols = 0;
  // Fused parts (c_attn, SwiGLU's c_fc) stored grouped, q groups in the 2D layout, `parts` in the 1D one; global
  // columns keep the GPT-2 tensor's order.
  FusedColumns fused;
  int parts = 1, part = 0;
  // The last padding_rows global rows are storage padding (wte's padded vocabulary): always zero, not part of the
  // GPT-2 tensor, which has rows - padding_rows rows (initialization zeroes them, loading and gathering skip them).
  std::int64_t padding_rows = 0;
  // The same for the last padding_cols global columns (a vector over the padded vocabulary: BERT's decoder bias).
  std::int64_t padding_cols = 0;
  std::int64_t tensor_rows() const { return rows - padding_rows; }
  std::int64_t tensor_cols() const { return cols - padding_cols; }
  // Whether global element (gr, gc) is storage padding (zero, not part of the tensor).
  bool is_padding(std::int64_t gr, std::int64_t gc) const { return gr >= tensor_rows() || gc >= tensor_cols(); }

  std::int64_t local_rows() const;
  std::int64_t local_cols() const;
  // GPT-2 (row, column) of local element (lr, lc).
  std::pair<std::int64_t, std::int64_t> global(std::int64_t lr, std::int64_t lc) const;
  // The stored (internal) column -> GPT-2 column (fused's grouping; identity where not fused).
  std::int64_t original_column(std::int64_t internal) const;
  // The same tensor's layout on rank `rank` of the communicator that holds it (grid ranks are i*q + j).
  Sharding on_rank(int rank) const;

  // A [rows, cols] tensor that every one of `parts` ranks holds whole (the 1D baseline's LayerNorms, row-parallel
  // biases and position embeddings), as rank `part` of them: gathering reads it from one rank, AdamW counts it once.
  static Sharding replicated(std::int64_t rows, std::int64_t cols, int parts, int part) {
    return Sharding{.kind = Kind::replicated, .q = 1, .i = 0, .j = 0, .rows = rows, .cols = cols, .fused = {},
                    .parts = parts, .part = part, .padding_rows = 0, .padding_cols = 0};
  }
};
// The former name of Sharding, kept so that code written against it still builds ("layout" now names a planner's
// Layout alone).
using ShardLayout [[deprecated("optimus::ShardLayout is now optimus::Sharding")]] = Sharding;

// Where a layer keeps its parameters and their gradients, and how the grid's tracker counts them: as the grid places its
// matrices (of(grid)), or in other memory — a spilled block's page-locked host memory (layers/spill.hpp).
struct ParameterTags {
  MemoryTag values, grads;
  static ParameterTags of(const Grid& grid) {
    return {.values = grid.tag(MemoryKind::parameters), .grads = grid.tag(MemoryKind::gradients)};
  }
};

// The tensors behind a parameter's value and gradient (a layer's parameter_storage lists them in parameters() order), so
// that a spilled block moves between memories by exchanging them with tensors of the same shapes (layers/spill.hpp).
template <class T>
struct ParameterStorage {
  Tensor<T>* value;
  Tensor<T>* grad;
};

template <class T>
struct ParameterRef {
  std::string name;
  std::vector<std::int64_t> shape;  // GPT-2 global shape: {rows, cols} or {n}
  Sharding layout;
  TensorView<T> value;  // local, contiguous [layout.local_rows(), layout.local_cols()]
  TensorView<T> grad;
  // The bf16 copy the layer computes with (a Linear2D weight, or wte beside the LM head, under mixed precision:
  // weight_copy.hpp), or null. Whoever writes `value` other than AdamW's fused update invalidates it (init_parameter
  // and load_parameter do).
  WeightCopy* compute = nullptr;
};

// Shards on a device are written and read through a host copy: `device` is the DeviceMemory they live in (the grid's
// device(); null for host shards); a device shard without it is refused with an error naming the parameter.

// Element-wise initialization from the GPT-2 rule (gpt_config.hpp): the same values for every q.
template <class T>
void init_parameter(const ParameterRef<T>& p, const GptConfig& config, DeviceMemory* device);

// Copies this rank's elements out of the full GPT-2 tensor; throws if its shape is not p.shape.
template <class T>
void load_parameter(const ParameterRef<T>& p, const GlobalMatrix& full, DeviceMemory* device);

// Collective over `comm` (the ranks that hold the tensor: a grid's grid(), or a 1D group): the full GPT-2
// tensor of values (or gradients); vectors come back as 1 x n.
template <class T>
GlobalMatrix gather_parameter(Communicator& comm, const ParameterRef<T>& p, bool gradient, DeviceMemory* device);

// A model's parameters by GPT-2 name. load_named copies this rank's elements of each named full tensor (vectors as
// 1 x n or n x 1) into the parameter of that name; unknown names and wrong shapes throw; parameters not named keep
// their values. gather_named is collective over `comm` (as gather_parameter): every tensor, full.
template <class T>
void load_named(const std::vector<ParameterRef<T>>& params, const std::map<std::string, GlobalMatrix>& tensors,
                DeviceMemory* device);
template <class T>
std::map<std::string, GlobalMatrix> gather_named(Communicator& comm, const std::vector<ParameterRef<T>>& params,
                                                 bool gradients, DeviceMemory* device);

// p's gradient *= factor, on `queue` (the average over replicas after their sum; the 2D GPT and the pipeline GPT use
// this one operation, so that their gradients agree bit for bit).
template <class T>
void scale_gradient(const ParameterRef<T>& p, T factor, const ops::Queue& queue);

}  // namespace optimus

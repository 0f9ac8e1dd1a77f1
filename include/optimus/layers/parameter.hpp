// Parameters of the 2D layers, described in GPT-2 terms: every layer lists, for each of its tensors, the
// GPT-2 name, the global shape, this rank's local values and gradients, and a ShardLayout that says where
// each local element sits in the global tensor. Initialization, loading full tensors and gathering them
// back are written once, on top of that description (parameter.cpp).
#pragma once

#include <Eigen/Core>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "optimus/core/gpt_config.hpp"
#include "optimus/core/tensor.hpp"
#include "optimus/grid/grid.hpp"

namespace optimus {

using GlobalMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Where local element (lr, lc) of rank (i, j) lives in a rows x cols GPT-2 tensor (vectors: rows = 1).
struct ShardLayout {
  enum class Kind { block, vector };
  Kind kind = Kind::block;
  int q = 1, i = 0, j = 0;
  std::int64_t rows = 0, cols = 0;
  // > 0 for c_attn: columns are stored grouped by heads, [Q_j | K_j | V_j] per column block j, and
  // qkv_hidden is h; global columns stay in GPT-2's [Q | K | V] order.
  std::int64_t qkv_hidden = 0;

  std::int64_t local_rows() const { return kind == Kind::block ? rows / q : 1; }
  std::int64_t local_cols() const { return kind == Kind::block ? cols / q : cols / (q * q); }
  // GPT-2 (row, column) of local element (lr, lc).
  std::pair<std::int64_t, std::int64_t> global(std::int64_t lr, std::int64_t lc) const;
  // The stored (internal) column -> GPT-2 column, for c_attn's head grouping; identity otherwise.
  std::int64_t original_column(std::int64_t internal) const;
  ShardLayout on_rank(int row, int col) const;
};

template <class T>
struct ParameterRef {
  std::string name;
  std::vector<std::int64_t> shape;  // GPT-2 global shape: {rows, cols} or {n}
  ShardLayout layout;
  TensorView<T> value;  // local, contiguous [layout.local_rows(), layout.local_cols()]
  TensorView<T> grad;
};

// Element-wise initialization from the GPT-2 rule (gpt_config.hpp): the same values for every q.
template <class T>
void init_parameter(const ParameterRef<T>& p, const GptConfig& config);

// Copies this rank's elements out of the full GPT-2 tensor; throws if its shape is not p.shape.
template <class T>
void load_parameter(const ParameterRef<T>& p, const GlobalMatrix& full);

// Collective over the grid: the full GPT-2 tensor of values (or gradients); vectors come back as 1 x n.
template <class T>
GlobalMatrix gather_parameter(const Grid& grid, const ParameterRef<T>& p, bool gradient);

}  // namespace optimus

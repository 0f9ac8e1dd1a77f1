// optimus::LayerNorm2D: y = (x - mean) / sqrt(var + eps) * gamma + beta over the h features of each row; and, with
// NormSpec::Kind::rmsnorm (RMSNorm2D), y = x / sqrt(mean(x^2) + eps) * gamma: no mean, no beta.
//   x, y: [N, h] (rank (i, j) holds rows block i, feature block j); gamma, beta: [h] split in q*q pieces.
// The features of a row are spread over grid row i, so the statistics are row all-reduces, in two passes
// (the mean, then the sum of squared deviations), which keeps fp32 accurate when |mean| >> std; RMSNorm's one pass
// (the sum of squares) is the second with the mean taken as 0, by the same kernels.
// backward: one row all-reduce of (sum dxhat, sum dxhat*xhat); dgamma, dbeta reduce-scattered along the column
// (RMSNorm: its dx has no mean term, and no dbeta).
// Split (weight_gradients.hpp): dx now; dgamma, dbeta queued with xhat and a copy of dy (the fused partials kernel
// runs once for each half, each half keeping its own outputs, so the values are those of the whole backward).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optimus/config/gpt_config.hpp"
#include "optimus/core/ops.hpp"

#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/dist_vector.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/weight_gradients.hpp"

namespace optimus {

template <class T>
class LayerNorm2D {
 public:
  LayerNorm2D(const Grid& grid, std::string name, std::int64_t hidden);
  // The same with gamma, beta and their gradients where `tags` say (ParameterTags).
  LayerNorm2D(const Grid& grid, const ParameterTags& tags, std::string name, std::int64_t hidden);
  // The norm `spec` says (LayerNorm or RMSNorm, and its eps).
  LayerNorm2D(const Grid& grid, const ParameterTags& tags, std::string name, std::int64_t hidden, NormSpec spec);

  const NormSpec& spec() const { return spec_; }

  using Context = LayerNormContext<T>;

  // x, y: [N, h]; a training pass saves xhat and 1/std in `saved`.
  DistMatrix<T> forward(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same split: dx now; dgamma, dbeta queued in `later` (which this layer must outlive).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);

  // For a block (layers/block_logic.hpp), whose LayerNorms feed a linear layer and sit on its residual paths:
  //   * forward_saved: y as the next linear layer keeps its input (SavedActivation: bf16 under mixed precision, y and
  //     xhat then written in bf16 by the normalizing kernel itself, no f32 copies; counted as activations in training,
  //     the linear layer taking it over); the values of forward(x), bit for bit, as that layer would keep them;
  //   * forward_saved given the local row sums [N/q] of x, which the kernel that wrote x computed
  //     (ops::dropout_residual): LayerNorm's first pass over x is skipped (RMSNorm takes none: an empty tensor);
  //   * backward_plus: dx + residual [N, h] (the gradient that reached x along the residual path), added by the
  //     kernel that writes dx; dgamma, dbeta accumulated now (later null) or queued in *later.
  SavedActivation<T> forward_saved(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  SavedActivation<T> forward_saved(const DistMatrix<T>& x, Tensor<T> local_row_sums, const Pass& pass, Context& saved);
  DistMatrix<T> backward_plus(Context saved, const DistMatrix<T>& dy, const DistMatrix<T>& residual,
                              WeightGradients* later);

  void parameters(std::vector<ParameterRef<T>>& out);
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out);
  void zero_grad();

 private:
  // The local row sums of x [N/q]; the row statistics, reduced along the grid row, with gamma and beta's column
  // block; a training pass's context.
  struct Statistics {
    Tensor<T> row_sum, sq_dev, gamma, beta;
  };
  Tensor<T> row_sums_of(const DistMatrix<T>& x) const;
  Statistics statistics(const DistMatrix<T>& x, Tensor<T> row_sum) const;
  bool centered() const { return spec_.centered(); }
  ops::Normalization normalization() const { return {.hidden = hidden_, .eps = spec_.eps, .centered = centered()}; }
  void keep(const Pass& pass, SavedActivation<T> xhat, Tensor<T> rstd, Context& saved) const;
  // dx (+ residual unless it is null), with dgamma and dbeta accumulated now (later null) or queued.
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, const DistMatrix<T>* residual,
                               WeightGradients* later);
  // dy's partial sums over this rank's rows: dgamma, dbeta [1, h/q] and (sum dxhat, sum dxhat*xhat) [2 * rows].
  struct Partials {
    Tensor<T> dgamma, dbeta, sums;
  };
  // xhat as kept (bf16 under mixed precision: read as it is, no widened copy).
  Partials partials(const DistMatrix<T>& dy, const SavedActivation<T>& xhat, TensorView<const T> gamma) const;
  void accumulate(const Partials& p);

  Grid grid_;
  std::string name_;
  std::int64_t hidden_;
  NormSpec spec_;
  DistVector<T> gamma_, dgamma_;
  std::optional<DistVector<T>> beta_, dbeta_;  // LayerNorm's; none for RMSNorm
};

// RMSNorm on the q x q grid: LayerNorm2D with NormSpec::Kind::rmsnorm (parameters: weight only).
template <class T>
class RMSNorm2D : public LayerNorm2D<T> {
 public:
  RMSNorm2D(const Grid& grid, const ParameterTags& tags, std::string name, std::int64_t hidden, double eps)
      : LayerNorm2D<T>(grid, tags, std::move(name), hidden, NormSpec{.kind = NormSpec::Kind::rmsnorm, .eps = eps}) {}
  RMSNorm2D(const Grid& grid, std::string name, std::int64_t hidden, double eps)
      : RMSNorm2D(grid, ParameterTags::of(grid), std::move(name), hidden, eps) {}
};

extern template class LayerNorm2D<float>;
extern template class LayerNorm2D<double>;

}  // namespace optimus

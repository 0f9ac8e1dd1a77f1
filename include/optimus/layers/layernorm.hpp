// optimus::LayerNorm2D: y = (x - mean) / sqrt(var + 1e-5) * gamma + beta over the h features of each row.
//   x, y: [N, h] (rank (i, j) holds rows block i, feature block j); gamma, beta: [h] split in q*q pieces.
// The features of a row are spread over grid row i, so the statistics are row all-reduces, in two passes
// (the mean, then the sum of squared deviations), which keeps fp32 accurate when |mean| >> std.
// backward: one row all-reduce of (sum dxhat, sum dxhat*xhat); dgamma, dbeta reduce-scattered along the column.
// Split (weight_gradients.hpp): dx now; dgamma, dbeta queued with xhat and a copy of dy (the fused partials kernel
// runs once for each half, each half keeping its own outputs, so the values are those of the whole backward).
#pragma once

#include <optional>
#include <string>
#include <vector>

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

  using Context = LayerNormContext<T>;

  // x, y: [N, h]; a training pass saves xhat and 1/std in `saved`.
  DistMatrix<T> forward(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same split: dx now; dgamma, dbeta queued in `later` (which this layer must outlive).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);

  // With the block's residual paths fused in (layers/block_logic.hpp):
  //   * forward of an x whose local row sums [N/q] the kernel that wrote it computed (ops::dropout_residual): the
  //     first pass over x is skipped; the result is forward(x)'s, bit for bit;
  //   * backward returning dx + residual [N, h] (the gradient that reached x along the residual path), added by the
  //     kernel that writes dx; dgamma, dbeta accumulated now (later null) or queued in *later.
  DistMatrix<T> forward(const DistMatrix<T>& x, Tensor<T> local_row_sums, const Pass& pass, Context& saved);
  DistMatrix<T> backward_plus(Context saved, const DistMatrix<T>& dy, const DistMatrix<T>& residual,
                              WeightGradients* later);

  void parameters(std::vector<ParameterRef<T>>& out);
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out);
  void zero_grad();

 private:
  // dx (+ residual unless it is null), with dgamma and dbeta accumulated now (later null) or queued.
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, const DistMatrix<T>* residual,
                               WeightGradients* later);
  // dy's partial sums over this rank's rows: dgamma, dbeta [1, h/q] and (sum dxhat, sum dxhat*xhat) [2 * rows].
  struct Partials {
    Tensor<T> dgamma, dbeta, sums;
  };
  Partials partials(const DistMatrix<T>& dy, TensorView<const T> xhat, TensorView<const T> gamma) const;
  void accumulate(const Partials& p);

  Grid grid_;
  std::string name_;
  std::int64_t hidden_;
  DistVector<T> gamma_, beta_, dgamma_, dbeta_;
};

extern template class LayerNorm2D<float>;
extern template class LayerNorm2D<double>;

}  // namespace optimus

// What a linear layer's forward_gelu returns, y = gelu(x W + b) and GELU's input pre = x W + b (which the MLP keeps
// for GELU's derivative), both [N, out] as the layer splits it; and the epilogue of a linear layer's GEMM.
#pragma once

#include <cstdint>

#include "optimus/core/ops.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/layers/pass.hpp"

namespace optimus {

template <class T>
struct GeluOutput {
  DistMatrix<T> y;
  DistMatrix<T> pre;

  // Both [rows, cols] on `grid`, unwritten (the product and its epilogue write every element); pre counted as
  // activations in training.
  static GeluOutput allocate(const Grid& grid, std::int64_t rows, std::int64_t cols, const Pass& pass) {
    return {DistMatrix<T>::uninitialized(grid, rows, cols, MemoryKind::workspace),
            DistMatrix<T>::uninitialized(grid, rows, cols,
                                         pass.training ? MemoryKind::activations : MemoryKind::workspace)};
  }
};

// The epilogue of a linear layer's GEMM: its bias block [1, out] added, then GELU with its input written to `pre`
// when `pre` is given (forward_gelu).
template <class T>
ops::Epilogue<T> linear_epilogue(TensorView<const T> bias, DistMatrix<T>* pre) {
  using Kind = typename ops::Epilogue<T>::Kind;
  return pre != nullptr ? ops::Epilogue<T>{Kind::bias_gelu, bias, pre->local()}
                        : ops::Epilogue<T>{Kind::bias, bias, TensorView<T>()};
}

}  // namespace optimus

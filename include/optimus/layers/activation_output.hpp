// An MLP activation's output and input: y (the next linear layer's input) and pre (c_fc's output, which the MLP keeps
// for the activation's derivative), kept as the layers keep them (SavedActivation: bf16 under mixed precision) — what
// a linear layer's forward_gelu returns (y = gelu(x W + b), pre = x W + b, both [N, out] as the layer splits it) and
// what SwiGLU makes of c_fc's [gate | up] (layers/block_logic.hpp); and the epilogue of a linear layer's GEMM.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "optimus/core/ops.hpp"
#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/pass.hpp"

namespace optimus {

template <class T>
struct ActivationOutput {
  SavedActivation<T> y;    // taken over by the next linear layer as its input (its context, in training)
  SavedActivation<T> pre;  // kept by the MLP for GELU's backward

  // Both [rows, cols] on `grid` (counted as activations in training, as workspace otherwise) from the layer's
  // `multiply(out, pre)`, which writes x W + b into `out` — and, given `pre`, gelu of it there with x W + b into *pre.
  // Under mixed precision the product writes x W + b in f32 and one kernel writes y and pre in bf16 from it
  // (ops::gelu_forward into bf16: the bits of casting both, without their f32 copies); otherwise the product's epilogue
  // writes both, kept as they are.
  template <class Multiply>
  static ActivationOutput make(const Grid& grid, std::int64_t rows, std::int64_t cols, const Pass& pass,
                         Multiply&& multiply) {
    const MemoryKind kept = pass.training ? MemoryKind::activations : MemoryKind::workspace;
    if constexpr (std::is_same_v<T, float>) {
      if (SavedActivation<T>::keeps_bf16(grid)) {
        DistMatrix<T> sum = DistMatrix<T>::uninitialized(grid, rows, cols, MemoryKind::workspace);
        multiply(sum, nullptr);
        ActivationOutput out{SavedActivation<T>::uninitialized(grid, rows, cols, kept),
                       SavedActivation<T>::uninitialized(grid, rows, cols, kept)};
        ops::gelu_forward(std::as_const(sum).local(), out.y.bf16_storage().view(), out.pre.bf16_storage().view(),
                          grid.queue());
        return out;
      }
    }
    DistMatrix<T> y = DistMatrix<T>::uninitialized(grid, rows, cols, kept);
    DistMatrix<T> pre = DistMatrix<T>::uninitialized(grid, rows, cols, kept);
    multiply(y, &pre);
    return {SavedActivation<T>(std::move(y), kept), SavedActivation<T>(std::move(pre), kept)};
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

// optimus::Linear2D: y = x W + b on the q x q grid (docs/design.md, "Layers").
//   x: [N, in], W: [in, out] in q x q blocks, b: [out] split in q*q pieces (DistVector; none for a linear built without
//   a bias: y = x W), y: [N, out].
//   forward : y = summa_ab(x, W) + b; the bias's column block is all-gathered along the grid column and added by
//             the product's last GEMM (fused on the GPU where cuBLASLt offers it), as is GELU in forward_gelu.
//   backward: dx = summa_abt(dy, W); dW += summa_atb(x, dy); db += column sums of dy, reduce-scattered
//             along the grid column. Gradients accumulate until zero_grad(). Split (weight_gradients.hpp): dx now,
//             dW and db queued with x and a copy of dy.
// A training forward saves the input in its context as a SavedActivation (bf16 when the grid's GEMM math is bf16: half
// the bytes, the values the products take); backward consumes the context.
// Mixed precision (T = float on a grid whose GEMM math is bf16, W where the grid keeps its parameters): the products
// take W's bf16 copy (weight_copy.hpp), which AdamW's update writes with the master; parameters() hands it out with W.
// dy's bf16 copy, which backward's products take, is written by the pass that sums dy's columns for db
// (ops::column_sums with a copy): no cast kernel of its own.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/grid/summa.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/dist_vector.hpp"
#include "optimus/layers/activation_output.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/weight_copy.hpp"
#include "optimus/layers/weight_gradients.hpp"

namespace optimus {

template <class T>
class Linear2D {
 public:
  // A plain linear with a bias, its parameters where the grid keeps them.
  Linear2D(const Grid& grid, std::string name, std::int64_t in, std::int64_t out);
  // W, b and their gradients where `tags` say (ParameterTags); `fused` parts stored grouped (c_attn, SwiGLU's c_fc:
  // Sharding), their widths adding up to out; with a bias or without (`bias` false: y = x W, no b among the
  // parameters; Llama's linears).
  Linear2D(const Grid& grid, const ParameterTags& tags, std::string name, std::int64_t in, std::int64_t out,
           FusedColumns fused, bool bias);

  using Context = LinearContext<T>;

  // x: [N, in] -> y: [N, out]; a training pass fills `saved`.
  DistMatrix<T> forward(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  // y = gelu(x W + b) and GELU's input pre = x W + b (counted as activations in training, for GELU's derivative).
  ActivationOutput<T> forward_gelu(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  // The same from an input already kept as this layer keeps it (LayerNorm2D::forward_saved): a training pass takes it
  // over as its context, without a copy or a cast.
  DistMatrix<T> forward(SavedActivation<T> x, const Pass& pass, Context& saved);
  ActivationOutput<T> forward_gelu(SavedActivation<T> x, const Pass& pass, Context& saved);
  // dy: [N, out] -> dx: [N, in]; accumulates dW, db.
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  // The same split: dx now; dW, db queued in `later` (which this layer must outlive).
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);

  void parameters(std::vector<ParameterRef<T>>& out);
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out);
  void zero_grad();

  std::int64_t in() const { return in_; }
  std::int64_t out() const { return out_; }

 private:
  // y = x W + b (+ GELU with pre), a training pass keeping x in `saved`.
  void multiply(const DistMatrix<T>& x, const Pass& pass, Context& saved, DistMatrix<T>& y, DistMatrix<T>* pre);
  void multiply(SavedActivation<T> x, const Pass& pass, Context& saved, DistMatrix<T>& y, DistMatrix<T>* pre);
  void product(const SummaOperand<T>& x, DistMatrix<T>& y, DistMatrix<T>* pre);
  // W as the products take it: its bf16 copy under mixed precision (cast first if not current), else W.
  SummaOperand<T> weight();
  DistMatrix<T> backward_checked(const Context& saved, const DistMatrix<T>& dy) const;  // dx, allocated
  // This rank's column sums of dy [1, out/q] (db's unreduced partial; empty without a bias, unless summed anyway by the
  // pass that writes dy's bf16 copy); under bf16 math that pass writes the copy, which the products take, into
  // `dy_bf16`.
  Tensor<T> bias_partial(const DistMatrix<T>& dy, std::optional<SavedActivation<T>>& dy_bf16) const;

  Grid grid_;
  std::string name_;
  std::int64_t in_, out_;
  FusedColumns fused_;
  DistMatrix<T> w_, dw_;
  std::optional<DistVector<T>> b_, db_;  // none without a bias
  std::unique_ptr<WeightCopy> w_bf16_;  // [in/q, out/q] under mixed precision (see above), else null
};

extern template class Linear2D<float>;
extern template class Linear2D<double>;

}  // namespace optimus

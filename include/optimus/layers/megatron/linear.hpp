// Megatron's column- and row-parallel linear layers, y = x W + b, over a Group of p ranks.
//   ColumnParallelLinear: W [in, out] split by columns (rank r: [in, out/p]), b likewise.
//     forward : x [N, in] replicated -> y [N, out/p], no communication; the bias (and GELU in forward_gelu) is
//               the GEMM's epilogue.
//     backward: dx = dy W^T is partial on each rank -> one all-reduce of [N, in] (Megatron's f operator), in flight
//               while dW = x^T dy multiplies (Megatron's asynchronous all-reduce; blocking with the grid's overlap off).
//   RowParallelLinear: W split by rows (rank r: [in/p, out]), b [out] replicated.
//     forward : x [N, in/p] -> partial x W, one all-reduce of [N, out] (Megatron's g operator), + b.
//     backward: dx [N, in/p] = dy W^T, no communication; db identical on every rank.
// Both split their backward as Linear2D does (weight_gradients.hpp): dx now, dW and db queued.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "optimus/grid/dist_matrix.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/context.hpp"
#include "optimus/layers/activation_output.hpp"
#include "optimus/layers/megatron/group.hpp"
#include "optimus/layers/parameter.hpp"
#include "optimus/layers/pass.hpp"
#include "optimus/layers/weight_gradients.hpp"

namespace optimus::megatron {

template <class T>
class ColumnParallelLinear {
 public:
  // `fused` parts (c_attn's [Q | K | V], SwiGLU's [gate | up]) stored grouped, rank r holding [Q_r | K_r | V_r]
  // (Sharding); none: the columns in order.
  // W, b and their gradients live where `tags` say (ParameterTags: a spilled block's in host memory); bias false:
  // y = x W, no b among the parameters.
  ColumnParallelLinear(const Group& group, const ParameterTags& tags, std::string name, std::int64_t in,
                       std::int64_t out, FusedColumns fused, bool bias);
  using Context = LinearContext<T>;

  DistMatrix<T> forward(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  // y = gelu(x W + b) and GELU's input pre = x W + b, both [N, out/p] (pre counted as activations in training).
  ActivationOutput<T> forward_gelu(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  // The same from an input already kept as this layer keeps it (LayerNorm2D::forward_saved), taken over by a training
  // pass; a bf16 one is widened for the GEMM, which rounds it back to the same values.
  DistMatrix<T> forward(SavedActivation<T> x, const Pass& pass, Context& saved);
  ActivationOutput<T> forward_gelu(SavedActivation<T> x, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);
  void parameters(std::vector<ParameterRef<T>>& out);
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out);
  void zero_grad();

 private:
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later);
  void multiply(const DistMatrix<T>& x, const Pass& pass, Context& saved, DistMatrix<T>& y, DistMatrix<T>* pre);
  void multiply(SavedActivation<T> x, const Pass& pass, Context& saved, DistMatrix<T>& y, DistMatrix<T>* pre);

  Group group_;
  std::string name_;
  std::int64_t in_, out_;
  FusedColumns fused_;
  DistMatrix<T> w_, dw_;                   // [in, out/p] on the one-rank grid
  std::optional<DistMatrix<T>> b_, db_;    // [1, out/p]; none without a bias
};

template <class T>
class RowParallelLinear {
 public:
  using Context = LinearContext<T>;

  // W, b and their gradients live where `tags` say (as ColumnParallelLinear's).
  // bias false: y = x W, no b among the parameters.
  RowParallelLinear(const Group& group, const ParameterTags& tags, std::string name, std::int64_t in, std::int64_t out,
                    bool bias);
  DistMatrix<T> forward(const DistMatrix<T>& x, const Pass& pass, Context& saved);
  // The same from an input already kept as this layer keeps it (the attention's output), taken over by a training
  // pass; a bf16 one is widened for the GEMM, which rounds it back to the same values.
  DistMatrix<T> forward(SavedActivation<T> x, const Pass& pass, Context& saved);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy);
  DistMatrix<T> backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later);
  void parameters(std::vector<ParameterRef<T>>& out);
  // The tensors behind parameters(), in its order (ParameterStorage).
  void parameter_storage(std::vector<ParameterStorage<T>>& out);
  void zero_grad();

 private:
  DistMatrix<T> backward_split(Context saved, const DistMatrix<T>& dy, WeightGradients* later);
  // y = x W, all-reduced over the group, + b.
  DistMatrix<T> product(TensorView<const T> x, std::int64_t rows);
  Group group_;
  std::string name_;
  std::int64_t in_, out_;
  DistMatrix<T> w_, dw_;                 // [in/p, out]
  std::optional<DistMatrix<T>> b_, db_;  // [1, out]; none without a bias
};

extern template class ColumnParallelLinear<float>;
extern template class ColumnParallelLinear<double>;
extern template class RowParallelLinear<float>;
extern template class RowParallelLinear<double>;

}  // namespace optimus::megatron

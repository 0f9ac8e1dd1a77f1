// optimus::Attention2D: GPT-2 causal multi-head self-attention on the q x q grid (DESIGN.md section 5).
//   x, y: [N, h] with N = b*s tokens; grid row i holds b/q whole sequences, grid column j holds heads
//   [j*a/q, (j+1)*a/q). c_attn (h -> 3h) stores its columns grouped by heads, so that column block j of
//   qkv is [Q_j | K_j | V_j] for exactly those heads: attention itself needs no communication.
//   probs = softmax(Q K^T / sqrt(h/a)) with a causal mask, dropped out (site attention_probs);
//   merged = probs V: [N, h] in GPT-2's head-major column order; y = c_proj(merged).
// Saved for backward: qkv [N, 3h] and probs [b*a*s, s] (both split q*q ways), freed by backward.
#pragma once

#include "optimus/layers/dropout.hpp"
#include "optimus/grid/saved_activation.hpp"
#include "optimus/layers/linear.hpp"

namespace optimus {
namespace detail {
struct AttentionGeometry;

// What attention (2D or 1D) saves for backward: qkv [N, 3h] (this rank's heads) and the softmax probabilities,
// both in bf16 under mixed precision (SavedActivation<T>::keeps_bf16).
template <class T>
struct AttentionSaved {
  std::optional<SavedActivation<T>> qkv;
  Tensor<T> probs;          // [sequences * heads * s, s] of this rank, unless kept in bf16
  Tensor<bf16> probs_bf16;  // the same, in bf16
  std::int64_t seq = 0;
  std::uint64_t step = 0;
};
}  // namespace detail

template <class T>
class Attention2D {
 public:
  // name: e.g. "h.0.attn". Throws if q does not divide heads, or heads does not divide hidden.
  Attention2D(const Grid& grid, const std::string& name, std::int64_t hidden, std::int64_t heads, DropoutSpec dropout);

  // x: [N, h] with sequences of `seq` tokens.
  DistMatrix<T> forward(const DistMatrix<T>& x, std::int64_t seq, const Pass& pass);
  DistMatrix<T> backward(const DistMatrix<T>& dy);

  void parameters(std::vector<ParameterRef<T>>& out);
  void zero_grad();

 private:
  detail::AttentionGeometry geometry(std::int64_t local_rows, std::int64_t seq, std::uint64_t step,
                                     double dropout) const;

  const Grid* grid_;
  std::int64_t hidden_, heads_;
  DropoutSpec dropout_;
  Linear2D<T> c_attn_, c_proj_;
  detail::AttentionSaved<T> saved_;  // qkv [N, 3h] and probs [(b/q)*(a/q)*s, s], split q*q ways
};

extern template class Attention2D<float>;
extern template class Attention2D<double>;

}  // namespace optimus

// Causal softmax of attention scores (optimus/core/ops.hpp): checks, then the one dispatch (ops_dispatch.hpp).
#include "cpu_kernels.hpp"
#include "ops_dispatch.hpp"

namespace optimus::ops {
namespace {

using detail::contiguous;
using detail::dispatch;

// [tiles * seq, seq] operands of one shape, contiguous.
template <class T>
void check_tiles(const char* op, const TensorView<const T>& a, const char* b_name, const TensorView<T>& b) {
  OPTIMUS_CHECK(a.rank() == 2 && a.size(1) > 0 && a.size(0) % a.size(1) == 0, op,
                ": expected [tiles * seq, seq] scores, got shape ", a.shape());
  OPTIMUS_CHECK(a.shape() == b.shape(), op, ": ", b_name, " has shape ", b.shape(), ", expected ", a.shape());
  OPTIMUS_CHECK(a.is_contiguous() && b.is_contiguous(), op, ": operands must be contiguous");
}

}  // namespace

template <class T>
void causal_softmax_forward(TensorView<const T> scores, T scale, TensorView<T> probs, const Queue& queue) {
  const char* op = "causal_softmax_forward";
  check_tiles(op, scores, "probs", probs);
  dispatch<T>(op, {contiguous("scores", scores), contiguous("probs", probs)}, queue,
              [&] { cpu::causal_softmax_forward(scores, scale, probs); },
              [&](const auto& k) { k.causal_softmax_forward(scores, scale, probs, queue); });
}

template <class T>
void causal_softmax_backward(TensorView<const T> probs, TensorView<const T> dp, T scale, TensorView<T> ds,
                             const Queue& queue) {
  const char* op = "causal_softmax_backward";
  check_tiles(op, probs, "ds", ds);
  OPTIMUS_CHECK(dp.shape() == probs.shape() && dp.is_contiguous(), op, ": dp has shape ", dp.shape(), ", expected ",
                probs.shape(), " (contiguous)");
  dispatch<T>(op, {contiguous("probs", probs), contiguous("dp", dp), contiguous("ds", ds)}, queue,
              [&] { cpu::causal_softmax_backward(probs, dp, scale, ds); },
              [&](const auto& k) { k.causal_softmax_backward(probs, dp, scale, ds, queue); });
}

#define OPTIMUS_INSTANTIATE(T)                                                                                      \
  template void causal_softmax_forward<T>(TensorView<const T>, T, TensorView<T>, const Queue&);                     \
  template void causal_softmax_backward<T>(TensorView<const T>, TensorView<const T>, T, TensorView<T>, const Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

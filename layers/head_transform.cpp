// HeadTransform<T>: a linear and the blocks' GELU before the masked-LM head's norm (head_transform.hpp).
#include "optimus/layers/head_transform.hpp"

#include <utility>

#include "block_logic.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/ops.hpp"

namespace optimus {

template <class T>
HeadTransform<T>::HeadTransform(const Grid& grid, const std::string& name, std::int64_t hidden, MlpKind activation)
    : grid_(grid),
      activation_(activation),
      dense_(grid, ParameterTags::of(grid), name + ".dense", hidden, hidden, FusedColumns{}, true) {
  OPTIMUS_CHECK(activation == MlpKind::gelu || activation == MlpKind::gelu_erf, "head transform: its activation is ",
                name_of(activation), ", not a GELU (gelu or gelu_erf)");
}

template <class T>
DistMatrix<T> HeadTransform<T>::forward(const DistMatrix<T>& x, const Pass& pass, Context& saved) {
  saved = Context{};
  DistMatrix<T> pre = dense_.forward(x, pass, saved.c_fc);
  DistMatrix<T> y = DistMatrix<T>::uninitialized(grid_, pre.rows(), pre.cols(), MemoryKind::workspace);
  if (activation_ == MlpKind::gelu) {
    ops::gelu_forward<T>(std::as_const(pre).local(), y.local(), grid_.queue());
  } else {
    ops::gelu_erf_forward<T>(std::as_const(pre).local(), y.local(), grid_.queue());
  }
  if (pass.training) {
    saved.pre.emplace(std::move(pre), MemoryKind::activations);
    saved.mark = ContextMark(grid_);
  }
  return y;
}

template <class T>
DistMatrix<T> HeadTransform<T>::backward_any(Context saved, const DistMatrix<T>& dy, WeightGradients* later) {
  saved.mark.check(grid_, "head transform");
  DistMatrix<T> dpre = dy.clone();
  if (activation_ == MlpKind::gelu) {
    detail::gelu_backward(*saved.pre, dpre);
  } else {
    detail::gelu_erf_backward(*saved.pre, dpre);
  }
  saved.pre.reset();
  return later != nullptr ? dense_.backward(std::move(saved.c_fc), dpre, *later)
                          : dense_.backward(std::move(saved.c_fc), dpre);
}

template <class T>
DistMatrix<T> HeadTransform<T>::backward(Context saved, const DistMatrix<T>& dy) {
  return backward_any(std::move(saved), dy, nullptr);
}

template <class T>
DistMatrix<T> HeadTransform<T>::backward(Context saved, const DistMatrix<T>& dy, WeightGradients& later) {
  return backward_any(std::move(saved), dy, &later);
}

template class HeadTransform<float>;
template class HeadTransform<double>;

}  // namespace optimus

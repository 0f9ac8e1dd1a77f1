// Vocabulary-parallel embedding lookups and their gradients, dispatched by device (optimus/core/ops.hpp).

#include "ops_dispatch.hpp"

#if OPTIMUS_HAVE_CUDA
#include "optimus/cuda/layer_kernels.hpp"
#endif

namespace optimus::ops {
namespace {

using detail::check_shape;
using detail::cols_of;
using detail::on_cuda;
using detail::rows_of;

using detail::ConstRows;
using detail::Rows;

}  // namespace

template <class T>
void embedding_lookup(TensorView<const T> wte, TensorView<const int> tokens, std::int64_t v0, TensorView<T> partial,
                      [[maybe_unused]] Queue queue) {
  const char* op = "embedding_lookup";
  const std::int64_t vn = rows_of(wte), width = cols_of(wte), n = tokens.numel();
  check_shape(op, "partial", partial, n, width);
  if (on_cuda<T>(op, {{"wte", wte.device()}, {"tokens", tokens.device()}, {"partial", partial.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::embedding_lookup(wte.data(), tokens.data(), n, v0, vn, width, partial.data(), detail::stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> W(wte.data(), vn, width);
  Rows<T> P(partial.data(), n, width);
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t id = tokens.data()[t];
    if (id >= v0 && id < v0 + vn) {
      P.row(t) = W.row(id - v0);
    } else {
      P.row(t).setZero();
    }
  }
}

template <class T>
void add_positions(TensorView<const T> wpe, std::int64_t row_offset, std::int64_t seq, TensorView<T> x,
                   [[maybe_unused]] Queue queue) {
  const char* op = "add_positions";
  const std::int64_t rows = rows_of(x), width = cols_of(x);
  OPTIMUS_CHECK(cols_of(wpe) == width && seq > 0 && seq <= rows_of(wpe), op, ": wpe has shape ", wpe.shape(),
                ", x has shape ", x.shape(), ", sequence length ", seq);
  check_shape(op, "x", x, rows, width);
  if (on_cuda<T>(op, {{"wpe", wpe.device()}, {"x", x.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::add_positions(wpe.data(), row_offset, seq, rows, width, x.data(), detail::stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> WPE(wpe.data(), rows_of(wpe), width);
  Rows<T> X(x.data(), rows, width);
  for (std::int64_t r = 0; r < rows; ++r) X.row(r) += WPE.row((row_offset + r) % seq);
}

template <class T>
void embedding_scatter_add(TensorView<const T> grad, TensorView<const int> tokens, std::int64_t v0, TensorView<T> dwte,
                           [[maybe_unused]] Queue queue) {
  const char* op = "embedding_scatter_add";
  const std::int64_t vn = rows_of(dwte), width = cols_of(dwte), n = tokens.numel();
  check_shape(op, "grad", grad, n, width);
  if (on_cuda<T>(op, {{"grad", grad.device()}, {"tokens", tokens.device()}, {"dwte", dwte.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::embedding_scatter_add(grad.data(), tokens.data(), n, v0, vn, width, dwte.data(), detail::stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> G(grad.data(), n, width);
  Rows<T> DW(dwte.data(), vn, width);
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t id = tokens.data()[t];
    if (id >= v0 && id < v0 + vn) DW.row(id - v0) += G.row(t);
  }
}

template <class T>
void position_grad(TensorView<const T> dx, std::int64_t row_offset, std::int64_t seq, TensorView<T> partial,
                   [[maybe_unused]] Queue queue) {
  const char* op = "position_grad";
  const std::int64_t rows = rows_of(dx), width = cols_of(dx), max_seq = rows_of(partial);
  check_shape(op, "partial", partial, max_seq, width);
  OPTIMUS_CHECK(seq > 0 && seq <= max_seq, op, ": sequence length ", seq, " outside 1..", max_seq);
  if (on_cuda<T>(op, {{"dx", dx.device()}, {"partial", partial.device()}})) {
#if OPTIMUS_HAVE_CUDA
    if constexpr (std::is_same_v<T, float>) {
      cuda::position_grad(dx.data(), row_offset, seq, rows, width, max_seq, partial.data(), detail::stream_of(queue));
    }
#endif
    return;
  }
  const ConstRows<T> DX(dx.data(), rows, width);
  Rows<T> P(partial.data(), max_seq, width);
  P.setZero();
  for (std::int64_t r = 0; r < rows; ++r) P.row((row_offset + r) % seq) += DX.row(r);
}

#define OPTIMUS_INSTANTIATE(T)                                                                                     \
  template void embedding_lookup<T>(TensorView<const T>, TensorView<const int>, std::int64_t, TensorView<T>, Queue); \
  template void add_positions<T>(TensorView<const T>, std::int64_t, std::int64_t, TensorView<T>, Queue);            \
  template void embedding_scatter_add<T>(TensorView<const T>, TensorView<const int>, std::int64_t, TensorView<T>,   \
                                         Queue);                                                                    \
  template void position_grad<T>(TensorView<const T>, std::int64_t, std::int64_t, TensorView<T>, Queue);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

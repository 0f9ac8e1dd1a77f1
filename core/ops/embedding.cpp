// Vocabulary-parallel embedding lookups and their gradients (optimus/core/ops.hpp), each described once: its checks,
// its CPU body (cpu_kernels.hpp; the simulated device runs it on its stream) and its CUDA launch
// (embedding_loss_kernels.cu), through dispatch.hpp's run.
#include "optimus/core/cpu_kernels.hpp"
#include "dispatch.hpp"

namespace optimus::ops {
namespace {

using detail::check_shape;
using detail::cols_of;
using detail::in;
using detail::out;
using detail::rows_of;
using detail::run;

}  // namespace

template <class T>
void embedding_lookup(TensorView<const T> wte, TensorView<const int> tokens, std::int64_t v0, TensorView<T> partial,
                      const Queue& queue) {
  const char* op = "embedding_lookup";
  const std::int64_t vn = rows_of(wte), width = cols_of(wte), n = tokens.numel();
  check_shape(op, "wte", wte, vn, width);
  check_shape(op, "partial", partial, n, width);
  run<T>(
      op, queue, [v0](auto wte_, auto tokens_, auto partial_) { cpu::embedding_lookup(wte_, tokens_, v0, partial_); },
      [v0](auto wte_, auto tokens_, auto partial_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::embedding_lookup(wte_.data(), tokens_.data(), tokens_.numel(), v0, rows_of(wte_),
                                                   cols_of(wte_), partial_.data(), s));
      },
      in("wte", wte), in("tokens", tokens), out("partial", partial));
}

template <class T>
void add_positions(TensorView<const T> wpe, std::int64_t row_offset, std::int64_t seq, TensorView<T> x,
                   const Queue& queue) {
  const char* op = "add_positions";
  const std::int64_t rows = rows_of(x), width = cols_of(x);
  OPTIMUS_CHECK(cols_of(wpe) == width && seq > 0 && seq <= rows_of(wpe), op, ": wpe has shape ", wpe.shape(),
                ", x has shape ", x.shape(), ", sequence length ", seq);
  check_shape(op, "wpe", wpe, rows_of(wpe), width);
  check_shape(op, "x", x, rows, width);
  run<T>(
      op, queue, [=](auto wpe_, auto x_) { cpu::add_positions(wpe_, row_offset, seq, x_); },
      [=](auto wpe_, auto x_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(
            cuda::add_positions(wpe_.data(), row_offset, seq, rows_of(x_), cols_of(x_), x_.data(), s));
      },
      in("wpe", wpe), out("x", x));
}

template <class T>
void embedding_scatter_add(TensorView<const T> grad, TensorView<const int> tokens, std::int64_t v0, TensorView<T> dwte,
                           const Queue& queue) {
  const char* op = "embedding_scatter_add";
  const std::int64_t vn = rows_of(dwte), width = cols_of(dwte), n = tokens.numel();
  check_shape(op, "grad", grad, n, width);
  check_shape(op, "dwte", dwte, vn, width);
  run<T>(
      op, queue, [v0](auto grad_, auto tokens_, auto dwte_) { cpu::embedding_scatter_add(grad_, tokens_, v0, dwte_); },
      [v0](auto grad_, auto tokens_, auto dwte_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::embedding_scatter_add(grad_.data(), tokens_.data(), tokens_.numel(), v0,
                                                        rows_of(dwte_), cols_of(dwte_), dwte_.data(), s));
      },
      in("grad", grad), in("tokens", tokens), out("dwte", dwte));
}

template <class T>
void position_grad(TensorView<const T> dx, std::int64_t row_offset, std::int64_t seq, TensorView<T> partial,
                   const Queue& queue) {
  const char* op = "position_grad";
  const std::int64_t rows = rows_of(dx), width = cols_of(dx), max_seq = rows_of(partial);
  check_shape(op, "dx", dx, rows, width);
  check_shape(op, "partial", partial, max_seq, width);
  OPTIMUS_CHECK(seq > 0 && seq <= max_seq, op, ": sequence length ", seq, " outside 1..", max_seq);
  run<T>(
      op, queue, [=](auto dx_, auto partial_) { cpu::position_grad(dx_, row_offset, seq, partial_); },
      [=](auto dx_, auto partial_, cudaStream_t s) {
        OPTIMUS_CUDA_LAUNCH(cuda::position_grad(dx_.data(), row_offset, seq, rows_of(dx_), cols_of(dx_),
                                                rows_of(partial_), partial_.data(), s));
      },
      in("dx", dx), out("partial", partial));
}

#define OPTIMUS_INSTANTIATE(T)                                                                                         \
  template void embedding_lookup<T>(TensorView<const T>, TensorView<const int>, std::int64_t, TensorView<T>,            \
                                    const Queue&);                                                                      \
  template void add_positions<T>(TensorView<const T>, std::int64_t, std::int64_t, TensorView<T>, const Queue&);         \
  template void embedding_scatter_add<T>(TensorView<const T>, TensorView<const int>, std::int64_t, TensorView<T>,       \
                                         const Queue&);                                                                 \
  template void position_grad<T>(TensorView<const T>, std::int64_t, std::int64_t, TensorView<T>, const Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

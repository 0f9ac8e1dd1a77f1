// Vocabulary-parallel embedding lookups and their gradients (optimus/core/ops.hpp): checks, then the one dispatch
// (ops_dispatch.hpp).
#include "cpu_kernels.hpp"
#include "ops_dispatch.hpp"

namespace optimus::ops {
namespace {

using detail::check_shape;
using detail::cols_of;
using detail::contiguous;
using detail::dispatch;
using detail::rows_of;

}  // namespace

template <class T>
void embedding_lookup(TensorView<const T> wte, TensorView<const int> tokens, std::int64_t v0, TensorView<T> partial,
                      const Queue& queue) {
  const char* op = "embedding_lookup";
  const std::int64_t vn = rows_of(wte), width = cols_of(wte), n = tokens.numel();
  check_shape(op, "wte", wte, vn, width);
  check_shape(op, "partial", partial, n, width);
  dispatch<T>(op, {contiguous("wte", wte), contiguous("tokens", tokens), contiguous("partial", partial)}, queue,
              [&] { cpu::embedding_lookup(wte, tokens, v0, partial); },
              [&](const auto& k) { k.embedding_lookup(wte, tokens, v0, partial, queue); });
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
  dispatch<T>(op, {contiguous("wpe", wpe), contiguous("x", x)}, queue,
              [&] { cpu::add_positions(wpe, row_offset, seq, x); },
              [&](const auto& k) { k.add_positions(wpe, row_offset, seq, x, queue); });
}

template <class T>
void embedding_scatter_add(TensorView<const T> grad, TensorView<const int> tokens, std::int64_t v0, TensorView<T> dwte,
                           const Queue& queue) {
  const char* op = "embedding_scatter_add";
  const std::int64_t vn = rows_of(dwte), width = cols_of(dwte), n = tokens.numel();
  check_shape(op, "grad", grad, n, width);
  check_shape(op, "dwte", dwte, vn, width);
  dispatch<T>(op, {contiguous("grad", grad), contiguous("tokens", tokens), contiguous("dwte", dwte)}, queue,
              [&] { cpu::embedding_scatter_add(grad, tokens, v0, dwte); },
              [&](const auto& k) { k.embedding_scatter_add(grad, tokens, v0, dwte, queue); });
}

template <class T>
void position_grad(TensorView<const T> dx, std::int64_t row_offset, std::int64_t seq, TensorView<T> partial,
                   const Queue& queue) {
  const char* op = "position_grad";
  const std::int64_t rows = rows_of(dx), width = cols_of(dx), max_seq = rows_of(partial);
  check_shape(op, "dx", dx, rows, width);
  check_shape(op, "partial", partial, max_seq, width);
  OPTIMUS_CHECK(seq > 0 && seq <= max_seq, op, ": sequence length ", seq, " outside 1..", max_seq);
  dispatch<T>(op, {contiguous("dx", dx), contiguous("partial", partial)}, queue,
              [&] { cpu::position_grad(dx, row_offset, seq, partial); },
              [&](const auto& k) { k.position_grad(dx, row_offset, seq, partial, queue); });
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

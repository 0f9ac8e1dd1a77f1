// CPU backend: vocabulary-parallel embedding and cross-entropy (cpu_kernels.hpp).
#include "cpu_kernels.hpp"
#include "eigen_views.hpp"
#include "vector_clones.hpp"

namespace optimus::cpu {
namespace {

using detail::cols_of;
using detail::ConstRows;
using detail::Rows;
using detail::rows_of;

bool in_slice(std::int64_t id, std::int64_t v0, std::int64_t vn) { return id >= v0 && id < v0 + vn; }

// x[c] = exp(x[c] - max) over n contiguous logits (the loop vectorises: math::softmax_exp has no call in f32).
template <class T>
OPTIMUS_VECTOR_CLONES void exps_in_place(T* x, T max, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c) x[c] = math::softmax_exp(x[c], T(1), max);
}

}  // namespace

template <class T>
void embedding_lookup(TensorView<const T> wte, TensorView<const int> tokens, std::int64_t v0, TensorView<T> partial) {
  const std::int64_t vn = rows_of(wte), width = cols_of(wte), n = tokens.numel();
  const ConstRows<T> W(wte.data(), vn, width);
  Rows<T> P(partial.data(), n, width);
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t id = tokens.data()[t];
    if (in_slice(id, v0, vn)) {
      P.row(t) = W.row(id - v0);
    } else {
      P.row(t).setZero();
    }
  }
}

template <class T>
void add_positions(TensorView<const T> wpe, std::int64_t row_offset, std::int64_t seq, TensorView<T> x) {
  const std::int64_t rows = rows_of(x), width = cols_of(x);
  const ConstRows<T> WPE(wpe.data(), rows_of(wpe), width);
  Rows<T> X(x.data(), rows, width);
  for (std::int64_t r = 0; r < rows; ++r) X.row(r) += WPE.row((row_offset + r) % seq);
}

template <class T>
void embedding_scatter_add(TensorView<const T> grad, TensorView<const int> tokens, std::int64_t v0,
                           TensorView<T> dwte) {
  const std::int64_t vn = rows_of(dwte), width = cols_of(dwte), n = tokens.numel();
  const ConstRows<T> G(grad.data(), n, width);
  Rows<T> DW(dwte.data(), vn, width);
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t id = tokens.data()[t];
    if (in_slice(id, v0, vn)) DW.row(id - v0) += G.row(t);
  }
}

template <class T>
void position_grad(TensorView<const T> dx, std::int64_t row_offset, std::int64_t seq, TensorView<T> partial) {
  const std::int64_t rows = rows_of(dx), width = cols_of(dx);
  const ConstRows<T> DX(dx.data(), rows, width);
  Rows<T> P(partial.data(), rows_of(partial), width);
  P.setZero();
  for (std::int64_t r = 0; r < rows; ++r) P.row((row_offset + r) % seq) += DX.row(r);
}

template <class T>
void cross_entropy_exp_sums(TensorView<T> logits, TensorView<const T> max, TensorView<const int> targets,
                            std::int64_t row_offset, std::int64_t v0, TensorView<T> sums) {
  const std::int64_t rows = rows_of(logits), vn = cols_of(logits);
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = logits.data() + r * vn;
    const std::int64_t target = targets.data()[row_offset + r];
    sums.data()[2 * r + 1] = in_slice(target, v0, vn) ? row[target - v0] : T(0);
    exps_in_place(row, max.data()[r], vn);
    sums.data()[2 * r] = lane_sum(row, vn);
  }
}

template <class T>
void cross_entropy_finish(TensorView<T> probs, TensorView<const T> max, TensorView<const T> sums,
                          TensorView<double> row_loss) {
  const std::int64_t rows = rows_of(probs), vn = cols_of(probs);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T sum = sums.data()[2 * r];
    row_loss.data()[r] = math::cross_entropy_loss(sum, max.data()[r], sums.data()[2 * r + 1]);
    T* row = probs.data() + r * vn;
    for (std::int64_t c = 0; c < vn; ++c) row[c] = math::normalized(row[c], sum);
  }
}

template <class T>
void cross_entropy_backward(TensorView<T> probs, TensorView<const int> targets, std::int64_t row_offset,
                            std::int64_t v0, std::int64_t mean_over) {
  const std::int64_t rows = rows_of(probs), vn = cols_of(probs);
  const T n_tokens = static_cast<T>(mean_over);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t target = targets.data()[row_offset + r];
    T* row = probs.data() + r * vn;
    for (std::int64_t c = 0; c < vn; ++c) row[c] = math::cross_entropy_grad(row[c], target == v0 + c, n_tokens);
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                                    \
  template void embedding_lookup<T>(TensorView<const T>, TensorView<const int>, std::int64_t, TensorView<T>);     \
  template void add_positions<T>(TensorView<const T>, std::int64_t, std::int64_t, TensorView<T>);                 \
  template void embedding_scatter_add<T>(TensorView<const T>, TensorView<const int>, std::int64_t, TensorView<T>); \
  template void position_grad<T>(TensorView<const T>, std::int64_t, std::int64_t, TensorView<T>);                 \
  template void cross_entropy_exp_sums<T>(TensorView<T>, TensorView<const T>, TensorView<const int>, std::int64_t, \
                                          std::int64_t, TensorView<T>);                                           \
  template void cross_entropy_finish<T>(TensorView<T>, TensorView<const T>, TensorView<const T>, TensorView<double>); \
  template void cross_entropy_backward<T>(TensorView<T>, TensorView<const int>, std::int64_t, std::int64_t, std::int64_t);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::cpu

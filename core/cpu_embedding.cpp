// CPU backend: vocabulary-parallel embedding and cross-entropy (cpu_kernels.hpp).
#include <algorithm>
#include <limits>

#include "optimus/core/cpu_kernels.hpp"
#include "eigen_views.hpp"
#include "vector_clones.hpp"

namespace optimus::cpu {
namespace {

using detail::cols_of;
using detail::ConstRows;
using detail::ConstVec;
using detail::Rows;
using detail::rows_of;

bool in_slice(std::int64_t id, std::int64_t v0, std::int64_t vn) { return id >= v0 && id < v0 + vn; }

// The slice's columns that are vocabulary ids, not padding: [0, valid).
std::int64_t valid_columns(std::int64_t v0, std::int64_t vocab, std::int64_t vn) {
  return std::clamp<std::int64_t>(vocab - v0, 0, vn);
}

// A row's dlogits in place of its `valid` logits: (exp(x - max) / sum - [c == target]) / n_tokens.
template <class T>
OPTIMUS_VECTOR_CLONES void gradient_row(T* x, T max, T sum, std::int64_t valid, std::int64_t target, T n_tokens) {
  for (std::int64_t c = 0; c < valid; ++c) {
    x[c] = math::cross_entropy_grad(math::normalized(math::softmax_exp(x[c], T(1), max), sum), c == target, n_tokens);
  }
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
void cross_entropy_stats(TensorView<const T> logits, TensorView<const int> targets, std::int64_t row_offset,
                         std::int64_t v0, std::int64_t vocab, TensorView<T> stats) {
  const std::int64_t rows = rows_of(logits), vn = cols_of(logits), valid = valid_columns(v0, vocab, vn);
  T* local_max = stats.data();
  T* max = local_max + rows;
  T* sum = max + rows;
  T* target_logit = sum + rows;
  // The online softmax a block of columns at a time: the block's max (vectorised), the running sum rescaled when the
  // max grows, then the block's exponentials against the running max, summed in lanes. One read of the logits: the
  // block is still in the cache for its second look.
  constexpr std::int64_t kBlock = 1024;
  T block[kBlock];  // the block's exponentials
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = logits.data() + r * vn;
    T m = -std::numeric_limits<T>::infinity(), s = T(0);
    for (std::int64_t c0 = 0; c0 < valid; c0 += kBlock) {
      const std::int64_t n = std::min(kBlock, valid - c0);
      const T block_max = ConstVec<T>(row + c0, n).maxCoeff();
      if (block_max > m) {
        s *= math::exp_nonpositive(m - block_max);
        m = block_max;
      }
      exps(row + c0, m, n, block);
      s += lane_sum(block, n);
    }
    local_max[r] = max[r] = m;
    sum[r] = s;
    const std::int64_t target = targets.data()[row_offset + r];
    target_logit[r] = in_slice(target, v0, valid) ? row[target - v0] : T(0);
  }
}

template <class T>
void cross_entropy_rescale(TensorView<T> stats) {
  const std::int64_t rows = stats.numel() / 4;
  const T* local_max = stats.data();
  const T* max = local_max + rows;
  T* sum = stats.data() + 2 * rows;
  for (std::int64_t r = 0; r < rows; ++r) sum[r] *= math::exp_nonpositive(local_max[r] - max[r]);
}

template <class T>
void cross_entropy_gradient(TensorView<T> logits, TensorView<const T> stats, TensorView<const int> targets,
                            std::int64_t row_offset, std::int64_t v0, std::int64_t vocab, std::int64_t mean_over) {
  const std::int64_t rows = rows_of(logits), vn = cols_of(logits), valid = valid_columns(v0, vocab, vn);
  const T* max = stats.data() + rows;
  const T* sum = max + rows;
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = logits.data() + r * vn;
    const int target = targets.data()[row_offset + r];
    if (target == math::kIgnoredTarget) {  // not predicted: no gradient
      std::fill(row, row + vn, T(0));
      continue;
    }
    gradient_row(row, max[r], sum[r], valid, target - v0, static_cast<T>(mean_over));
    std::fill(row + valid, row + vn, T(0));  // padding ids: no probability, no gradient
  }
}

void cross_entropy_gradient(TensorView<const float> logits, TensorView<const float> stats,
                            TensorView<const int> targets, std::int64_t row_offset, std::int64_t v0,
                            std::int64_t vocab, std::int64_t mean_over, TensorView<bf16> dlogits) {
  // Row by row as the in-place form runs gradient_row (its vector clones and their tails on the same elements), on a
  // copy of the row, then rounded.
  const std::int64_t rows = rows_of(logits), vn = cols_of(logits), valid = valid_columns(v0, vocab, vn);
  const float* max = stats.data() + rows;
  const float* sum = max + rows;
  std::vector<float> row(static_cast<std::size_t>(vn));
  for (std::int64_t r = 0; r < rows; ++r) {
    const int target = targets.data()[row_offset + r];
    if (target == math::kIgnoredTarget) {  // not predicted: no gradient
      std::fill(dlogits.data() + r * vn, dlogits.data() + (r + 1) * vn, bf16(0.0f));
      continue;
    }
    std::copy(logits.data() + r * vn, logits.data() + (r + 1) * vn, row.begin());
    gradient_row(row.data(), max[r], sum[r], valid, target - v0, static_cast<float>(mean_over));
    std::fill(row.begin() + valid, row.end(), 0.0f);  // padding ids: no probability, no gradient
    for (std::int64_t c = 0; c < vn; ++c) dlogits.data()[r * vn + c] = bf16(row[static_cast<std::size_t>(c)]);
  }
}

#define OPTIMUS_INSTANTIATE(T)                                                                                    \
  template void embedding_lookup<T>(TensorView<const T>, TensorView<const int>, std::int64_t, TensorView<T>);     \
  template void add_positions<T>(TensorView<const T>, std::int64_t, std::int64_t, TensorView<T>);                 \
  template void embedding_scatter_add<T>(TensorView<const T>, TensorView<const int>, std::int64_t, TensorView<T>); \
  template void position_grad<T>(TensorView<const T>, std::int64_t, std::int64_t, TensorView<T>);                 \
  template void cross_entropy_stats<T>(TensorView<const T>, TensorView<const int>, std::int64_t, std::int64_t,        \
                                       std::int64_t, TensorView<T>);                                                  \
  template void cross_entropy_rescale<T>(TensorView<T>);                                                              \
  template void cross_entropy_gradient<T>(TensorView<T>, TensorView<const T>, TensorView<const int>, std::int64_t,    \
                                          std::int64_t, std::int64_t, std::int64_t);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::cpu

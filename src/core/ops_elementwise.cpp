// Element-wise operations, dropout and the in-process reductions (optimus/core/ops.hpp): checks, then the one
// dispatch (ops_dispatch.hpp) to the CPU kernels (optimus/core/kernels.hpp, cpu_kernels.hpp) or an accelerator's.
#include "cpu_kernels.hpp"
#include "ops_dispatch.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus::ops {
namespace {

using detail::contiguous;
using detail::contiguous_rows;
using detail::dispatch;

template <class T>
void check_same_shape(const char* op, const TensorView<T>& a, const char* b_name, const Shape& b) {
  OPTIMUS_CHECK(a.shape() == b, op, ": ", b_name, " has shape ", b, ", expected ", a.shape());
}

math::Combine combine_of(ReduceOp op) {
  return op == ReduceOp::sum ? math::Combine::sum : op == ReduceOp::max ? math::Combine::max : math::Combine::min;
}

}  // namespace

template <class T>
void fill(TensorView<T> y, T value, const Queue& queue) {
  dispatch<T>("fill", {contiguous("y", y)}, queue, [&] { cpu::fill<T>(y, value); },
              [&](const auto& k) { k.fill(y, value, queue); });
}

template <class T>
void axpby(T alpha, TensorView<const T> x, T beta, TensorView<T> y, const Queue& queue) {
  check_same_shape("axpby", x, "y", y.shape());
  dispatch<T>("axpby", {contiguous("x", x), contiguous("y", y)}, queue, [&] { cpu::axpby<T>(alpha, x, beta, y); },
              [&](const auto& k) { k.axpby(alpha, x, beta, y, queue); });
}

template <class T>
void add_row_broadcast(TensorView<const T> row, TensorView<T> y, const Queue& queue) {
  OPTIMUS_CHECK(y.rank() == 2 && row.numel() == y.size(1), "add_row_broadcast: row has shape ", row.shape(),
                ", y has shape ", y.shape());
  dispatch<T>("add_row_broadcast", {contiguous("row", row), contiguous("y", y)}, queue,
              [&] { cpu::add_row_broadcast<T>(row, y); },
              [&](const auto& k) { k.add_row_broadcast(row, y, queue); });
}

template <class T>
void column_sums(TensorView<const T> x, TensorView<T> out, const Queue& queue) {
  OPTIMUS_CHECK(x.rank() == 2 && out.numel() == x.size(1), "column_sums: out has shape ", out.shape(),
                ", x has shape ", x.shape());
  dispatch<T>("column_sums", {contiguous("x", x), contiguous("out", out)}, queue, [&] { cpu::column_sums<T>(x, out); },
              [&](const auto& k) { k.column_sums(x, out, queue); });
}

void column_sums(TensorView<const float> x, TensorView<float> out, TensorView<bf16> x_bf16, const Queue& queue) {
  const char* op = "column_sums (with x in bf16)";
  OPTIMUS_CHECK(x.rank() == 2 && out.numel() == x.size(1), op, ": out has shape ", out.shape(), ", x has shape ",
                x.shape());
  check_same_shape(op, x, "x_bf16", x_bf16.shape());
  dispatch<float>(op, {contiguous("x", x), contiguous("out", out), contiguous("x_bf16", x_bf16)}, queue,
                  [&] { cpu::column_sums(x, out, x_bf16); },
                  [&](const auto& k) { k.column_sums(x, out, x_bf16, queue); });
}

template <class T>
void gelu_forward(TensorView<const T> x, TensorView<T> y, const Queue& queue) {
  check_same_shape("gelu_forward", x, "y", y.shape());
  dispatch<T>("gelu_forward", {contiguous("x", x), contiguous("y", y)}, queue, [&] { cpu::gelu_forward<T>(x, y); },
              [&](const auto& k) { k.gelu_forward(x, y, queue); });
}

void gelu_forward(TensorView<const float> x, TensorView<bf16> y, TensorView<bf16> x_kept, const Queue& queue) {
  const char* op = "gelu_forward (into bf16)";
  check_same_shape(op, x, "y", y.shape());
  check_same_shape(op, x, "x_kept", x_kept.shape());
  dispatch<float>(op, {contiguous("x", x), contiguous("y", y), contiguous("x_kept", x_kept)}, queue,
                  [&] { cpu::gelu_forward(x, y, x_kept); },
                  [&](const auto& k) { k.gelu_forward(x, y, x_kept, queue); });
}

template <class T>
void gelu_backward(TensorView<const T> x, TensorView<const T> dy, TensorView<T> dx, const Queue& queue) {
  check_same_shape("gelu_backward", x, "dy", dy.shape());
  check_same_shape("gelu_backward", x, "dx", dx.shape());
  dispatch<T>("gelu_backward", {contiguous("x", x), contiguous("dy", dy), contiguous("dx", dx)}, queue,
              [&] { cpu::gelu_backward<T>(x, dy, dx); },
              [&](const auto& k) { k.gelu_backward(x, dy, dx, queue); });
}

void gelu_backward(TensorView<const bf16> x, TensorView<const float> dy, TensorView<float> dx, const Queue& queue) {
  check_same_shape("gelu_backward (bf16 x)", x, "dy", dy.shape());
  check_same_shape("gelu_backward (bf16 x)", x, "dx", dx.shape());
  dispatch<float>("gelu_backward (bf16 x)", {contiguous("x", x), contiguous("dy", dy), contiguous("dx", dx)}, queue,
                  [&] { cpu::gelu_backward(x, dy, dx); }, [&](const auto& k) { k.gelu_backward(x, dy, dx, queue); });
}

template <class T>
void dropout(TensorView<T> x, std::uint64_t row0, std::uint64_t col0, double p, std::uint64_t seed,
             std::uint64_t stream, const Queue& queue) {
  OPTIMUS_CHECK(p >= 0.0 && p < 1.0, "dropout: the probability must be in [0, 1), got ", p);
  if (p == 0.0) return;
  OPTIMUS_CHECK(x.rank() == 2 && (x.stride(1) == 1 || x.size(1) <= 1),
                "dropout: needs a matrix with contiguous rows, got shape ", x.shape(), " and strides ", x.strides());
  OPTIMUS_CHECK(row0 + static_cast<std::uint64_t>(x.size(0)) <= 0x100000000ull &&
                    col0 + static_cast<std::uint64_t>(x.size(1)) <= 0x100000000ull,
                "dropout: rows up to ", row0 + static_cast<std::uint64_t>(x.size(0)), " and columns up to ",
                col0 + static_cast<std::uint64_t>(x.size(1)), " exceed the 2^32 x 2^32 index space of the masks");
  dispatch<T>("dropout", {contiguous_rows("x", x)}, queue, [&] { cpu::dropout<T>(x, row0, col0, p, seed, stream); },
              [&](const auto& k) { k.dropout(x, row0, col0, p, seed, stream, queue); });
}

namespace {

// The mask's checks, as dropout's; `x` is the block it draws for.
template <class T>
void check_mask(const char* op, const TensorView<T>& x, const DropoutMask& mask) {
  OPTIMUS_CHECK(mask.p >= 0.0 && mask.p < 1.0, op, ": the probability must be in [0, 1), got ", mask.p);
  OPTIMUS_CHECK(x.rank() == 2 && (x.stride(1) == 1 || x.size(1) <= 1), op,
                ": needs a matrix with contiguous rows, got shape ", x.shape(), " and strides ", x.strides());
  OPTIMUS_CHECK(mask.row0 + static_cast<std::uint64_t>(x.size(0)) <= 0x100000000ull &&
                    mask.col0 + static_cast<std::uint64_t>(x.size(1)) <= 0x100000000ull,
                op, ": rows up to ", mask.row0 + static_cast<std::uint64_t>(x.size(0)), " and columns up to ",
                mask.col0 + static_cast<std::uint64_t>(x.size(1)),
                " exceed the 2^32 x 2^32 index space of the masks");
}

}  // namespace

template <class T>
void dropout_residual(TensorView<const T> residual, TensorView<T> x, const DropoutMask& mask, TensorView<T> row_sums,
                      const Queue& queue) {
  const char* op = "dropout_residual";
  check_mask(op, x, mask);
  check_same_shape(op, x, "residual", residual.shape());
  if (row_sums.rank() == 0) {  // TensorView{}: no sums wanted
    dispatch<T>(op, {contiguous("residual", residual), contiguous("x", x)}, queue,
                [&] { cpu::dropout_residual<T>(residual, x, mask, row_sums); },
                [&](const auto& k) { k.dropout_residual(residual, x, mask, row_sums, queue); });
    return;
  }
  OPTIMUS_CHECK(row_sums.shape() == Shape{x.size(0)}, op, ": row_sums has shape ", row_sums.shape(), ", expected [",
                x.size(0), "]");
  dispatch<T>(op, {contiguous("residual", residual), contiguous("x", x), contiguous("row_sums", row_sums)}, queue,
              [&] { cpu::dropout_residual<T>(residual, x, mask, row_sums); },
              [&](const auto& k) { k.dropout_residual(residual, x, mask, row_sums, queue); });
}

namespace {
// gu [m, 2f] against y (or dy) [m, f].
template <class G, class Y>
void check_swiglu(const char* op, const TensorView<G>& gu, const TensorView<Y>& y) {
  OPTIMUS_CHECK(gu.rank() == 2 && y.rank() == 2 && gu.size(0) == y.size(0) && gu.size(1) == 2 * y.size(1), op,
                ": gu has shape ", gu.shape(), ", expected [rows, 2 f] beside ", y.shape());
}
}  // namespace

template <class T>
void swiglu_forward(TensorView<const T> gu, TensorView<T> y, const Queue& queue) {
  check_swiglu("swiglu_forward", gu, y);
  dispatch<T>("swiglu_forward", {contiguous("gu", gu), contiguous("y", y)}, queue,
              [&] { cpu::swiglu_forward<T>(gu, y); }, [&](const auto& k) { k.swiglu_forward(gu, y, queue); });
}

void swiglu_forward(TensorView<const float> gu, TensorView<bf16> y, TensorView<bf16> gu_kept, const Queue& queue) {
  const char* op = "swiglu_forward (into bf16)";
  check_swiglu(op, gu, y);
  check_same_shape(op, gu, "gu_kept", gu_kept.shape());
  dispatch<float>(op, {contiguous("gu", gu), contiguous("y", y), contiguous("gu_kept", gu_kept)}, queue,
                  [&] { cpu::swiglu_forward(gu, y, gu_kept); },
                  [&](const auto& k) { k.swiglu_forward(gu, y, gu_kept, queue); });
}

template <class T>
void swiglu_backward(TensorView<const T> gu, TensorView<const T> dy, TensorView<T> dgu, const Queue& queue) {
  const char* op = "swiglu_backward";
  check_swiglu(op, gu, dy);
  check_same_shape(op, gu, "dgu", dgu.shape());
  dispatch<T>(op, {contiguous("gu", gu), contiguous("dy", dy), contiguous("dgu", dgu)}, queue,
              [&] { cpu::swiglu_backward<T>(gu, dy, dgu); },
              [&](const auto& k) { k.swiglu_backward(gu, dy, dgu, queue); });
}

void swiglu_backward(TensorView<const bf16> gu, TensorView<const float> dy, TensorView<float> dgu,
                     const Queue& queue) {
  const char* op = "swiglu_backward (on bf16)";
  check_swiglu(op, gu, dy);
  check_same_shape(op, gu, "dgu", dgu.shape());
  dispatch<float>(op, {contiguous("gu", gu), contiguous("dy", dy), contiguous("dgu", dgu)}, queue,
                  [&] { cpu::swiglu_backward(gu, dy, dgu); },
                  [&](const auto& k) { k.swiglu_backward(gu, dy, dgu, queue); });
}

template <class T>
void dropout_copy(TensorView<const T> x, TensorView<T> y, const DropoutMask& mask, const Queue& queue) {
  const char* op = "dropout_copy";
  check_mask(op, x, mask);
  check_same_shape(op, x, "y", y.shape());
  dispatch<T>(op, {contiguous("x", x), contiguous("y", y)}, queue, [&] { cpu::dropout_copy<T>(x, y, mask); },
              [&](const auto& k) { k.dropout_copy(x, y, mask, queue); });
}

template <class T>
void rotary(TensorView<T> qkv, const Rotary& r, const Queue& queue) {
  const char* op = "rotary";
  const std::int64_t heads = r.heads + 2 * r.kv_heads;  // of Q, K and V
  OPTIMUS_CHECK(qkv.rank() == 2 && r.heads > 0 && r.kv_heads > 0 && r.heads % r.kv_heads == 0 && r.seq > 0 &&
                    qkv.size(1) % heads == 0 && (qkv.size(1) / heads) % 2 == 0 && qkv.size(0) % r.seq == 0,
                op, ": qkv ", qkv.shape(), " is not whole sequences of ", r.seq, " rows by [Q | K | V] of ", r.heads,
                " query and ", r.kv_heads, " key/value heads of an even dimension");
  OPTIMUS_CHECK(std::isfinite(r.theta) && r.theta > 1.0, op, ": theta = ", r.theta, " must be finite and above 1");
  dispatch<T>(op, {contiguous("qkv", qkv)}, queue, [&] { cpu::rotary<T>(qkv, r); },
              [&](const auto& k) { k.rotary(qkv, r, queue); });
}

template <class T>
void reduce_into(TensorView<T> acc, TensorView<const T> x, ReduceOp op, const Queue& queue) {
  check_same_shape("reduce_into", x, "acc", acc.shape());
  dispatch<T, true>("reduce_into", {contiguous("acc", acc), contiguous("x", x)}, queue,
                    [&] { cpu::combine(acc.data(), x.data(), acc.numel(), combine_of(op)); },
                    [&](const auto& k) { k.combine(acc, x, combine_of(op), queue); });
}

#define OPTIMUS_INSTANTIATE(T)                                                                               \
  template void fill<T>(TensorView<T>, T, const Queue&);                                                     \
  template void axpby<T>(T, TensorView<const T>, T, TensorView<T>, const Queue&);                            \
  template void add_row_broadcast<T>(TensorView<const T>, TensorView<T>, const Queue&);                      \
  template void column_sums<T>(TensorView<const T>, TensorView<T>, const Queue&);                            \
  template void gelu_forward<T>(TensorView<const T>, TensorView<T>, const Queue&);                           \
  template void gelu_backward<T>(TensorView<const T>, TensorView<const T>, TensorView<T>, const Queue&);     \
  template void dropout<T>(TensorView<T>, std::uint64_t, std::uint64_t, double, std::uint64_t, std::uint64_t, \
                           const Queue&);                                                                    \
  template void dropout_residual<T>(TensorView<const T>, TensorView<T>, const DropoutMask&, TensorView<T>,       \
                                    const Queue&);                                                           \
  template void rotary<T>(TensorView<T>, const Rotary&, const Queue&);                                       \
  template void swiglu_forward<T>(TensorView<const T>, TensorView<T>, const Queue&);                         \
  template void swiglu_backward<T>(TensorView<const T>, TensorView<const T>, TensorView<T>, const Queue&);   \
  template void dropout_copy<T>(TensorView<const T>, TensorView<T>, const DropoutMask&, const Queue&);       \
  template void reduce_into<T>(TensorView<T>, TensorView<const T>, ReduceOp, const Queue&);
OPTIMUS_INSTANTIATE(float)
OPTIMUS_INSTANTIATE(double)
#undef OPTIMUS_INSTANTIATE

}  // namespace optimus::ops

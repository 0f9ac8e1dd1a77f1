// GEMM dispatched by device (optimus/core/ops.hpp): cpu::gemm on the host, cuBLASLt on the GPU, in f32/f64 or with
// bf16 operands and f32 accumulation (mixed precision).
#include "ops_dispatch.hpp"
#include "optimus/core/kernels.hpp"

#if OPTIMUS_HAVE_CUDA
#include "optimus/cuda/layer_kernels.hpp"
#include "optimus/cuda/lt_gemm.hpp"
#endif

namespace optimus::ops {
namespace {

// op(A): [m, k], op(B): [k, n], C: [m, n], or an error naming the shapes.
template <class A, class B, class C>
void check_product(const char* op, bool trans_a, bool trans_b, const TensorView<A>& a, const TensorView<B>& b,
                   const TensorView<C>& c) {
  OPTIMUS_CHECK(a.rank() == 2 && b.rank() == 2 && c.rank() == 2, op, ": needs matrices, got ", a.shape(), ", ",
                b.shape(), ", ", c.shape());
  const std::int64_t m = trans_a ? a.size(1) : a.size(0), k = trans_a ? a.size(0) : a.size(1);
  const std::int64_t kb = trans_b ? b.size(1) : b.size(0), n = trans_b ? b.size(0) : b.size(1);
  OPTIMUS_CHECK(k == kb && c.size(0) == m && c.size(1) == n, op, ": op(A) is ", m, "x", k, ", op(B) is ", kb, "x", n,
                ", C is ", c.shape());
}

// The epilogue's operands: the bias [1, n] and GELU's input [m, n] on C's device, or an error naming them.
template <class T>
void check_epilogue(const char* op, const Epilogue<T>& e, const TensorView<T>& c) {
  using Kind = typename Epilogue<T>::Kind;
  e.check_fits(op, c.shape());
  if (e.kind == Kind::none) return;
  detail::common_device(op, {{"C", c.device()}, {"bias", e.bias.device()}});
  if (e.kind == Kind::bias) return;
  detail::common_device(op, {{"C", c.device()}, {"pre", e.pre.device()}});
}

// The epilogue applied after the GEMM, where it was not fused: bias, then pre = C and C = gelu(pre).
template <class T>
void apply_epilogue(const Epilogue<T>& e, const TensorView<T>& c, const Queue& queue) {
  using Kind = typename Epilogue<T>::Kind;
  if (e.kind == Kind::none) return;
  add_row_broadcast<T>(e.bias, c, queue);
  if (e.kind == Kind::bias) return;
  axpby<T>(T(1), TensorView<const T>(c), T(0), e.pre, queue);
  gelu_forward<T>(TensorView<const T>(e.pre), c, queue);
}

#if OPTIMUS_HAVE_CUDA
// cuBLASLt on row-major operands with contiguous rows (the product's shape already checked), with the epilogue fused
// where cuBLASLt has an algorithm for it and applied after the GEMM otherwise.
template <class In>
void lt_gemm(const char* op, cuda::GemmPrecision precision, bool trans_a, bool trans_b, float alpha,
             const TensorView<const In>& a, const TensorView<const In>& b, float beta, const TensorView<float>& c,
             const Epilogue<float>& epilogue, const Queue& queue) {
  OPTIMUS_CHECK(a.stride(1) == 1 && b.stride(1) == 1 && c.stride(1) == 1, op, ": CUDA operands need contiguous rows");
  OPTIMUS_CHECK(queue.gemm != nullptr, op, ": CUDA operands need the device's GEMM engine in the queue");
  using Kind = Epilogue<float>::Kind;
  const std::int64_t k = trans_a ? a.size(0) : a.size(1);
  cuda::LtEpilogue fused;
  if (epilogue.kind != Kind::none && epilogue.bias.is_contiguous() &&
      (epilogue.kind == Kind::bias || epilogue.pre.stride(1) == 1)) {
    fused.kind = epilogue.kind == Kind::bias ? cuda::LtEpilogue::Kind::bias : cuda::LtEpilogue::Kind::bias_gelu;
    fused.bias = epilogue.bias.data();
    fused.pre = epilogue.kind == Kind::bias_gelu ? epilogue.pre.data() : nullptr;
    fused.ld_pre = epilogue.kind == Kind::bias_gelu ? epilogue.pre.stride(0) : 0;
  }
  auto run = [&](const cuda::LtEpilogue& with) {
    return queue.gemm->run(precision, trans_a, trans_b, c.size(0), c.size(1), k, alpha, a.data(), a.stride(0),
                           b.data(), b.stride(0), beta, c.data(), c.stride(0), detail::stream_of(queue), with);
  };
  if (fused.kind != cuda::LtEpilogue::Kind::none && run(fused)) return;
  run(cuda::LtEpilogue{});  // a plain GEMM (cuBLASLt ran nothing if it did not offer the epilogue), then the epilogue
  apply_epilogue(epilogue, c, queue);
}

// The strided-batched form (gemm_batched): matrix 0 of each view and the element strides between matrices.
template <class In>
void lt_gemm_batched(const char* op, cuda::GemmPrecision precision, bool trans_a, bool trans_b, float alpha,
                     const BatchView<const In>& a, const BatchView<const In>& b, float beta, const BatchView<float>& c,
                     std::int64_t batch, const Queue& queue) {
  const TensorView<const In> a0 = a.matrix(0, batch), b0 = b.matrix(0, batch);
  const TensorView<float> c0 = c.matrix(0, batch);
  OPTIMUS_CHECK(a0.stride(1) == 1 && b0.stride(1) == 1 && c0.stride(1) == 1, op, ": CUDA operands need contiguous rows");
  OPTIMUS_CHECK(queue.gemm != nullptr, op, ": CUDA operands need the device's GEMM engine in the queue");
  const auto stride = [&](auto& v, auto& first) {
    return batch > 1 ? static_cast<std::int64_t>(v.matrix(1, batch).data() - first.data()) : 0;
  };
  const cuda::LtBatch strided{batch, stride(a, a0), stride(b, b0), stride(c, c0)};
  const std::int64_t k = trans_a ? a0.size(0) : a0.size(1);
  queue.gemm->run(precision, trans_a, trans_b, c0.size(0), c0.size(1), k, alpha, a0.data(), a0.stride(0), b0.data(),
                  b0.stride(0), beta, c0.data(), c0.stride(0), detail::stream_of(queue), {}, strided);
}
#endif

// `batch` matrices fit the view (its batched dimension divides), or an error naming the operand.
template <class T>
void check_batch(const char* op, const char* name, const BatchView<T>& v, std::int64_t batch) {
  const bool side = v.layout == Batched::side_by_side;
  OPTIMUS_CHECK(v.all.rank() == 2 && batch > 0 && v.all.size(side ? 1 : 0) % batch == 0, op, ": ", name, " has shape ",
                v.all.shape(), ", which does not hold ", batch, side ? " matrices side by side" : " stacked matrices");
}

// x widened to a contiguous f32 matrix (exact: every bf16 is a float).
Tensor<float> widen(const TensorView<const bf16>& x) {
  Tensor<float> out(x.shape(), MemoryTag{}, Init::none);
  to_f32(x, out.view());
  return out;
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, T alpha, TensorView<const T> a, TensorView<const T> b, T beta, TensorView<T> c,
          const Epilogue<T>& epilogue, Queue queue) {
  const char* op = "gemm";
  check_epilogue(op, epilogue, c);
  if constexpr (std::is_same_v<T, float>) {
    if (queue.math == GemmMath::bf16) {
      check_product(op, trans_a, trans_b, a, b, c);
      Tensor<bf16> a16(a.shape(), queue.scratch, Init::none), b16(b.shape(), queue.scratch, Init::none);
      to_bf16(a, a16.view(), queue);
      to_bf16(b, b16.view(), queue);
      gemm(trans_a, trans_b, alpha, std::as_const(a16).view(), std::as_const(b16).view(), beta, c, epilogue, queue);
      return;  // the copies are freed in stream order: the GEMM on the same stream has read them first
    }
  }
  if (!detail::on_cuda<T>(op, {{"A", a.device()}, {"B", b.device()}, {"C", c.device()}})) {
    cpu::gemm<T>(trans_a ? cpu::Trans::yes : cpu::Trans::no, trans_b ? cpu::Trans::yes : cpu::Trans::no, alpha, a, b,
                 beta, c);
    apply_epilogue(epilogue, c, queue);
    return;
  }
  check_product(op, trans_a, trans_b, a, b, c);
#if OPTIMUS_HAVE_CUDA
  if constexpr (std::is_same_v<T, float>) {
    lt_gemm(op, queue.math == GemmMath::tf32 ? cuda::GemmPrecision::tf32 : cuda::GemmPrecision::f32, trans_a,
            trans_b, alpha, a, b, beta, c, epilogue, queue);
  }
#endif
}

template <class T>
void gemm(bool trans_a, bool trans_b, T alpha, TensorView<const T> a, TensorView<const T> b, T beta, TensorView<T> c,
          Queue queue) {
  gemm(trans_a, trans_b, alpha, a, b, beta, c, Epilogue<T>{}, queue);
}

void gemm(bool trans_a, bool trans_b, float alpha, TensorView<const bf16> a, TensorView<const bf16> b, float beta,
          TensorView<float> c, const Epilogue<float>& epilogue, [[maybe_unused]] Queue queue) {
  const char* op = "gemm (bf16 operands)";
  check_product(op, trans_a, trans_b, a, b, c);
  check_epilogue(op, epilogue, c);
  if (!detail::on_cuda<float>(op, {{"A", a.device()}, {"B", b.device()}, {"C", c.device()}})) {
    const Tensor<float> a32 = widen(a), b32 = widen(b);
    cpu::gemm<float>(trans_a ? cpu::Trans::yes : cpu::Trans::no, trans_b ? cpu::Trans::yes : cpu::Trans::no, alpha,
                     a32.view(), b32.view(), beta, c);
    apply_epilogue(epilogue, c, queue);
    return;
  }
#if OPTIMUS_HAVE_CUDA
  lt_gemm(op, cuda::GemmPrecision::bf16_to_f32, trans_a, trans_b, alpha, a, b, beta, c, epilogue, queue);
#endif
}

void gemm(bool trans_a, bool trans_b, float alpha, TensorView<const bf16> a, TensorView<const bf16> b, float beta,
          TensorView<float> c, Queue queue) {
  gemm(trans_a, trans_b, alpha, a, b, beta, c, Epilogue<float>{}, queue);
}

template <class T>
void gemm_batched(bool trans_a, bool trans_b, T alpha, BatchView<const T> a, BatchView<const T> b, T beta,
                  BatchView<T> c, std::int64_t batch, [[maybe_unused]] Queue queue) {
  const char* op = "gemm_batched";
  check_batch(op, "A", a, batch);
  check_batch(op, "B", b, batch);
  check_batch(op, "C", c, batch);
  check_product(op, trans_a, trans_b, a.matrix(0, batch), b.matrix(0, batch), c.matrix(0, batch));
  if (!detail::on_cuda<T>(op, {{"A", a.all.device()}, {"B", b.all.device()}, {"C", c.all.device()}})) {
    for (std::int64_t i = 0; i < batch; ++i) {
      gemm(trans_a, trans_b, alpha, a.matrix(i, batch), b.matrix(i, batch), beta, c.matrix(i, batch), queue);
    }
    return;
  }
#if OPTIMUS_HAVE_CUDA
  if constexpr (std::is_same_v<T, float>) {
    if (queue.math == GemmMath::bf16) {  // the whole views cast once; the copies keep the batch layout
      Tensor<bf16> a16(a.all.shape(), queue.scratch, Init::none), b16(b.all.shape(), queue.scratch, Init::none);
      to_bf16(a.all, a16.view(), queue);
      to_bf16(b.all, b16.view(), queue);
      lt_gemm_batched(op, cuda::GemmPrecision::bf16_to_f32, trans_a, trans_b, alpha,
                      BatchView<const bf16>{std::as_const(a16).view(), a.layout},
                      BatchView<const bf16>{std::as_const(b16).view(), b.layout}, beta, c, batch, queue);
      return;
    }
    lt_gemm_batched(op, queue.math == GemmMath::tf32 ? cuda::GemmPrecision::tf32 : cuda::GemmPrecision::f32, trans_a,
                    trans_b, alpha, a, b, beta, c, batch, queue);
  }
#endif
}

namespace {

// A conversion between f32 and bf16 (y = x, rounded to nearest even or widened exactly): its checks, and the work
// itself on the CPU (any row strides). Returns false, having done nothing, when the operands are on the GPU.
template <class From, class To>
bool convert_on_cpu(const char* op, const TensorView<const From>& x, const TensorView<To>& y) {
  OPTIMUS_CHECK(x.shape() == y.shape() && x.rank() == 2, op, ": x is ", x.shape(), ", y is ", y.shape(),
                " (expected two matrices of one shape)");
  if (detail::on_cuda<float>(op, {{"x", x.device()}, {"y", y.device()}})) return false;
  for (std::int64_t r = 0; r < x.size(0); ++r) {
    for (std::int64_t c = 0; c < x.size(1); ++c) y(r, c) = static_cast<To>(x(r, c));
  }
  return true;
}

}  // namespace

void to_bf16(TensorView<const float> x, TensorView<bf16> y, [[maybe_unused]] Queue queue) {
  const char* op = "to_bf16";
  if (convert_on_cpu(op, x, y)) return;
  OPTIMUS_CHECK(x.stride(1) == 1 && y.is_contiguous(), op, ": on CUDA x needs contiguous rows and y contiguity");
#if OPTIMUS_HAVE_CUDA
  cuda::to_bf16_rows(x.data(), x.stride(0), y.data(), x.size(0), x.size(1), detail::stream_of(queue));
#endif
}

void to_f32(TensorView<const bf16> x, TensorView<float> y, [[maybe_unused]] Queue queue) {
  const char* op = "to_f32";
  if (convert_on_cpu(op, x, y)) return;
  OPTIMUS_CHECK(x.is_contiguous() && y.is_contiguous(), op, ": on CUDA x and y must be contiguous");
#if OPTIMUS_HAVE_CUDA
  cuda::to_f32(x.data(), y.data(), x.numel(), detail::stream_of(queue));
#endif
}

template void gemm<float>(bool, bool, float, TensorView<const float>, TensorView<const float>, float,
                          TensorView<float>, Queue);
template void gemm_batched<float>(bool, bool, float, BatchView<const float>, BatchView<const float>, float,
                                  BatchView<float>, std::int64_t, Queue);
template void gemm_batched<double>(bool, bool, double, BatchView<const double>, BatchView<const double>, double,
                                   BatchView<double>, std::int64_t, Queue);
template void gemm<double>(bool, bool, double, TensorView<const double>, TensorView<const double>, double,
                           TensorView<double>, Queue);
template void gemm<float>(bool, bool, float, TensorView<const float>, TensorView<const float>, float,
                          TensorView<float>, const Epilogue<float>&, Queue);
template void gemm<double>(bool, bool, double, TensorView<const double>, TensorView<const double>, double,
                           TensorView<double>, const Epilogue<double>&, Queue);

}  // namespace optimus::ops

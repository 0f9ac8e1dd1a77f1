// The simulated device's cuBLASLt (optimus/sim/lt_gemm.hpp): cuBLASLt's checks, then the CPU GEMM on the stream.
#include "optimus/sim/lt_gemm.hpp"

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "optimus/core/cpu_kernels.hpp"
#include "optimus/core/error.hpp"
#include "optimus/core/kernels.hpp"

namespace optimus::sim {
namespace {

using lt::Compute;
using lt::DataType;
using lt::MatrixLayout;

const char* name_of_type(DataType t) { return t == DataType::bf16 ? "bf16" : "f32"; }

DeviceAllocator& on_sim(DeviceAllocator& allocator) {
  OPTIMUS_CHECK(allocator.device().device() == Device::sim, "sim::LtGemm needs memory of a simulated device, got ",
                allocator.device().name());
  return allocator;
}

// ---- what prepare() checks: the matmul as cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul would see it --------

void check_types(const lt::Matmul& m) {
  const bool f32_in = m.a.type == DataType::f32 && m.b.type == DataType::f32;
  const bool bf16_in = m.a.type == DataType::bf16 && m.b.type == DataType::bf16;
  OPTIMUS_CHECK(m.c.type == m.d.type, "sim cuBLASLt: C is ", name_of_type(m.c.type), " but D is ",
                name_of_type(m.d.type), " (they must match)");
  OPTIMUS_CHECK(m.scale == DataType::f32, "sim cuBLASLt: the scale type must be f32 for f32 compute");
  const bool supported = (m.compute == Compute::f32 && f32_in && m.d.type == DataType::f32) ||
                         (m.compute == Compute::f32_fast_tf32 && f32_in && m.d.type == DataType::f32) ||
                         (m.compute == Compute::f32 && bf16_in);
  OPTIMUS_CHECK(supported, "sim cuBLASLt: no algorithm takes A ", name_of_type(m.a.type), ", B ",
                name_of_type(m.b.type), ", D ", name_of_type(m.d.type), " with ",
                m.compute == Compute::f32 ? "f32" : "TF32", " compute");
}

void check_layout(const char* which, const MatrixLayout& l) {
  OPTIMUS_CHECK(l.rows >= 1 && l.cols >= 1, "sim cuBLASLt: matrix ", which, " is ", l.rows, "x", l.cols);
  OPTIMUS_CHECK(l.ld >= l.rows, "sim cuBLASLt: matrix ", which, " (column-major ", l.rows, "x", l.cols,
                ") has leading dimension ", l.ld, " < its ", l.rows, " rows");
  OPTIMUS_CHECK(l.batch >= 1 && l.batch <= std::numeric_limits<std::int32_t>::max() && l.batch_stride >= 0, "sim cuBLASLt: matrix ", which, " has a batch of ", l.batch,
                " with stride ", l.batch_stride);
}

// Whether two matrices of layout `l`, k >= 1 batch strides apart, share an element: their offset k * stride is
// (column difference) * ld + (row difference) with |row difference| < rows and column difference < cols.
bool batch_overlaps(const MatrixLayout& l) {
  for (std::int64_t k = 1; k < l.batch; ++k) {
    const std::int64_t delta = k * l.batch_stride, columns = delta / l.ld, rest = delta % l.ld;
    if ((rest < l.rows && columns < l.cols) || (l.ld - rest < l.rows && columns + 1 < l.cols)) return true;
  }
  return false;
}

void check_shapes(const lt::Matmul& m) {
  for (auto [which, l] : {std::pair{"A", &m.a}, std::pair{"B", &m.b}, std::pair{"C", &m.c}, std::pair{"D", &m.d}}) {
    check_layout(which, *l);
  }
  OPTIMUS_CHECK(m.c == m.d, "sim cuBLASLt: C and D must have the same layout (D is written where C is read)");
  const bool ta = m.trans_a == Trans::yes, tb = m.trans_b == Trans::yes;
  const std::int64_t rows_a = ta ? m.a.cols : m.a.rows, k_a = ta ? m.a.rows : m.a.cols;
  const std::int64_t k_b = tb ? m.b.cols : m.b.rows, cols_b = tb ? m.b.rows : m.b.cols;
  OPTIMUS_CHECK(rows_a == m.d.rows && cols_b == m.d.cols && k_a == k_b, "sim cuBLASLt: op(A) is ", rows_a, "x", k_a,
                ", op(B) is ", k_b, "x", cols_b, ", D is ", m.d.rows, "x", m.d.cols);
  OPTIMUS_CHECK(m.a.batch == m.d.batch && m.b.batch == m.d.batch, "sim cuBLASLt: batch counts differ: A ", m.a.batch,
                ", B ", m.b.batch, ", D ", m.d.batch);
  OPTIMUS_CHECK(!batch_overlaps(m.d), "sim cuBLASLt: the ", m.d.batch, " output matrices (column-major ", m.d.rows,
                "x", m.d.cols, ", ld ", m.d.ld, ") overlap at batch stride ", m.d.batch_stride);
}

void check_epilogue(const lt::Matmul& m) {
  if (m.epilogue == lt::Epilogue::none) return;
  OPTIMUS_CHECK(m.bias_type == DataType::f32 && m.d.type == DataType::f32,
                "sim cuBLASLt: the epilogues Optimus uses take an f32 bias on an f32 output, got a ",
                name_of_type(m.bias_type), " bias on a ", name_of_type(m.d.type), " output");
  OPTIMUS_CHECK(m.d.batch == 1, "sim cuBLASLt: an epilogue on a batch needs the bias and aux batch strides, which "
                "Optimus does not set");
  if (m.epilogue != lt::Epilogue::gelu_aux_bias) return;
  OPTIMUS_CHECK(m.aux_type == DataType::f32, "sim cuBLASLt: GELU's input must be f32 like the output");
  OPTIMUS_CHECK(m.aux_ld % 8 == 0 && m.aux_ld >= m.d.rows, "sim cuBLASLt: EPILOGUE_AUX_LD = ", m.aux_ld,
                " must be divisible by 8 and at least D's ", m.d.rows, " rows");
}

void check_alignments(const lt::Matmul& m) {
  for (std::uint32_t a : {m.align_a, m.align_b, m.align_c, m.align_d, m.align_bias, m.align_aux}) {
    OPTIMUS_CHECK(a >= 1 && a <= 256 && std::has_single_bit(a), "sim cuBLASLt: a promised alignment of ", a,
                  " bytes is not a power of two up to 256");
  }
}

// ---- what execute() checks: the buffers of one run ---------------------------------------------------------------

// The host storage of a device buffer that must hold `bytes`, aligned to `promised` bytes and to `natural`.
const void* checked(const Runtime& device, const void* p, std::size_t bytes, std::uint32_t promised,
                    std::size_t natural, const char* what) {
  OPTIMUS_CHECK(p != nullptr, "sim cuBLASLt: the ", what, " pointer is null");
  const std::uint32_t aligned = lt::alignment(p, 0, 0);  // the pointer's own alignment, up to 256
  OPTIMUS_CHECK(aligned >= promised && aligned >= natural, "sim cuBLASLt: the ", what, " pointer is ", aligned,
                "-byte aligned, but the plan promised cuBLASLt ", promised,
                " bytes (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES)");
  return device.translate(p, bytes, what);
}

// A host view of matrix `i` of a column-major layout seen as row-major: [cols, rows], row stride ld.
template <class T>
TensorView<T> row_major(T* base, const MatrixLayout& l, std::int64_t i) {
  return TensorView<T>(base + i * l.batch_stride, Shape{l.cols, l.rows}, Shape{l.ld, 1}, Device::cpu);
}

// An f32 copy of a matrix as the GEMM takes it: bf16 widened exactly, or f32 rounded to TF32 (10 mantissa bits, to
// nearest even) for TF32 compute; empty when it is used as it is.
Tensor<float> compute_copy(const void* base, const MatrixLayout& l, std::int64_t i, Compute compute) {
  if (l.type == DataType::bf16) {
    const TensorView<const bf16> x = row_major(static_cast<const bf16*>(base), l, i);
    Tensor<float> wide(x.shape(), MemoryTag{}, Init::none);
    cpu::to_f32(x, wide.view());
    return wide;
  }
  if (compute != Compute::f32_fast_tf32) return {};
  const TensorView<const float> x = row_major(static_cast<const float*>(base), l, i);
  Tensor<float> tf32(x.shape(), MemoryTag{}, Init::none);
  for (std::int64_t r = 0; r < x.size(0); ++r) {
    for (std::int64_t c = 0; c < x.size(1); ++c) {
      const std::uint32_t u = std::bit_cast<std::uint32_t>(x(r, c));
      const std::uint32_t rounded = (u + 0xfffu + ((u >> 13) & 1u)) & ~std::uint32_t{0x1fff};
      tf32.view()(r, c) = std::bit_cast<float>((u & 0x7f800000u) == 0x7f800000u ? u : rounded);
    }
  }
  return tf32;
}

// D = alpha op(A) op(B) + beta C and the epilogue, as the CPU path computes the row-major product it came from:
// cpu::gemm(trans_a, trans_b, alpha, A, B, beta, C) on the row-major A (cuBLASLt's B), B (cuBLASLt's A) and C.
void compute(const lt::Matmul& m, const lt::Pointers& p) {
  const Trans trans_a = m.trans_b, trans_b = m.trans_a;
  for (std::int64_t i = 0; i < m.d.batch; ++i) {
    const Tensor<float> a_copy = compute_copy(p.b, m.b, i, m.compute), b_copy = compute_copy(p.a, m.a, i, m.compute);
    const TensorView<const float> a =
        a_copy.numel() > 0 ? a_copy.view() : row_major(static_cast<const float*>(p.b), m.b, i);
    const TensorView<const float> b =
        b_copy.numel() > 0 ? b_copy.view() : row_major(static_cast<const float*>(p.a), m.a, i);
    Tensor<float> narrow_out;  // f32 results of a bf16 output
    TensorView<float> c;
    if (m.d.type == DataType::f32) {
      c = row_major(static_cast<float*>(p.d), m.d, i);
      if (p.c != p.d && p.beta != 0.0f) cpu::copy<float>(row_major(static_cast<const float*>(p.c), m.c, i), c);
    } else {
      narrow_out = Tensor<float>(Shape{m.d.cols, m.d.rows}, MemoryTag{}, Init::zero);
      c = narrow_out.view();
      if (p.beta != 0.0f) cpu::to_f32(row_major(static_cast<const bf16*>(p.c), m.c, i), c);
    }
    cpu::gemm<float>(trans_a, trans_b, p.alpha, a, b, p.beta, c);
    if (m.epilogue != lt::Epilogue::none) {
      cpu::add_row_broadcast<float>(TensorView<const float>(static_cast<const float*>(p.bias), Shape{1, m.d.rows},
                                                            Device::cpu),
                                    c);
    }
    if (m.epilogue == lt::Epilogue::gelu_aux_bias) {
      const TensorView<float> pre(static_cast<float*>(p.aux), Shape{m.d.cols, m.d.rows}, Shape{m.aux_ld, 1},
                                  Device::cpu);
      cpu::axpby<float>(1.0f, c, 0.0f, pre);
      cpu::gelu_forward<float>(pre, c);
    }
    if (m.d.type == DataType::bf16) cpu::to_bf16(c, row_major(static_cast<bf16*>(p.d), m.d, i));
  }
}

}  // namespace

LtGemm::LtGemm(DeviceAllocator& allocator)
    : GemmEngine(on_sim(allocator), kWorkspaceBytes), device_(&static_cast<Runtime&>(allocator.device())) {}

std::unique_ptr<GemmEngine::Plan> LtGemm::prepare(const lt::Matmul& matmul, const lt::Pointers& /*first*/) {
  check_types(matmul);
  check_shapes(matmul);
  check_epilogue(matmul);
  check_alignments(matmul);
  return std::make_unique<Plan>();  // the simulated device offers every matmul it accepts
}

void LtGemm::execute(const Plan& /*plan*/, const lt::Matmul& m, const lt::Pointers& p, DeviceStream& stream) {
  Stream& s = device_->own(stream, "sim cuBLASLt");
  const std::size_t in = lt::size_of(m.a.type), out = lt::size_of(m.d.type);
  lt::Pointers host = p;
  host.a = checked(*device_, p.a, lt::extent_bytes(m.a), m.align_a, in, "A");
  host.b = checked(*device_, p.b, lt::extent_bytes(m.b), m.align_b, in, "B");
  host.c = checked(*device_, p.c, lt::extent_bytes(m.c), m.align_c, out, "C");
  host.d = const_cast<void*>(checked(*device_, p.d, lt::extent_bytes(m.d), m.align_d, out, "D"));
  std::vector<Access> accesses{{.begin = p.a, .bytes = lt::extent_bytes(m.a), .writes = false},
                               {.begin = p.b, .bytes = lt::extent_bytes(m.b), .writes = false},
                               {.begin = p.c, .bytes = lt::extent_bytes(m.c), .writes = false},
                               {.begin = p.d, .bytes = lt::extent_bytes(m.d), .writes = true}};
  if (m.epilogue != lt::Epilogue::none) {
    const auto bytes = static_cast<std::size_t>(m.d.rows) * 4;
    host.bias = checked(*device_, p.bias, bytes, m.align_bias, 4, "bias");
    accesses.push_back({.begin = p.bias, .bytes = bytes, .writes = false});
  }
  if (m.epilogue == lt::Epilogue::gelu_aux_bias) {
    const auto bytes = static_cast<std::size_t>((m.d.cols - 1) * m.aux_ld + m.d.rows) * 4;
    host.aux = const_cast<void*>(checked(*device_, p.aux, bytes, m.align_aux, 4, "epilogue aux (GELU input)"));
    accesses.push_back({.begin = p.aux, .bytes = bytes, .writes = true});
  }
  if (m.workspace > 0) {
    checked(*device_, p.workspace, m.workspace, 256, 256, "workspace");
  }
  s.launch("cuBLASLt matmul", std::move(accesses), [m, host] { compute(m, host); });
}

}  // namespace optimus::sim

// cuBLASLt matmul for row-major operands.
#include "optimus/cuda/lt_gemm.hpp"

#include <cstdint>
#include <memory>

namespace optimus::cuda {
namespace {

// RAII for the cuBLASLt descriptors of one call.
struct Layout {
  cublasLtMatrixLayout_t desc = nullptr;
  // With count > 1, a strided batch of `count` matrices `stride` elements apart.
  Layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t count = 1,
         std::int64_t stride = 0) {
    OPTIMUS_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&desc, type, static_cast<std::uint64_t>(rows),
                                                    static_cast<std::uint64_t>(cols), ld));
    if (count > 1) {
      const auto batch = static_cast<std::int32_t>(count);
      OPTIMUS_CHECK_CUBLAS(
          cublasLtMatrixLayoutSetAttribute(desc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
      OPTIMUS_CHECK_CUBLAS(cublasLtMatrixLayoutSetAttribute(desc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                            &stride, sizeof(stride)));
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(desc); }
};

struct Operation {
  cublasLtMatmulDesc_t desc = nullptr;
  Operation(cublasComputeType_t compute, bool trans_first, bool trans_second) {
    OPTIMUS_CHECK_CUBLAS(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    const cublasOperation_t a = trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t b = trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    OPTIMUS_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &a, sizeof(a)));
    OPTIMUS_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &b, sizeof(b)));
  }
  ~Operation() { cublasLtMatmulDescDestroy(desc); }
};

struct Preference {
  cublasLtMatmulPreference_t desc = nullptr;
  explicit Preference(std::size_t workspace) {
    OPTIMUS_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&desc));
    OPTIMUS_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(desc, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                              &workspace, sizeof(workspace)));
  }
  ~Preference() { cublasLtMatmulPreferenceDestroy(desc); }
};

}  // namespace

LtGemm::LtGemm(DeviceAllocator& allocator, std::size_t workspace_bytes)
    : allocator_(&allocator), workspace_bytes_(workspace_bytes) {
  OPTIMUS_CHECK_CUBLAS(cublasLtCreate(&handle_));
  workspace_ = allocator.allocate(workspace_bytes);
}

LtGemm::~LtGemm() {
  allocator_->release(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

namespace {

// Sets the epilogue's attributes on `op`; false when cuBLASLt cannot take it: an f32 epilogue on a bf16 output, a
// GELU input whose leading dimension is not a multiple of 8 elements, or pointers not 16-byte aligned.
bool set_epilogue(const Operation& op, GemmPrecision precision, const LtEpilogue& e) {
  if (e.kind == LtEpilogue::Kind::none) return true;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (precision == GemmPrecision::bf16 || !aligned(e.bias)) return false;
  if (e.kind == LtEpilogue::Kind::bias_gelu && (e.ld_pre % 8 != 0 || !aligned(e.pre))) return false;
  const cublasLtEpilogue_t kind =
      e.kind == LtEpilogue::Kind::bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const cudaDataType_t f32 = CUDA_R_32F;
  OPTIMUS_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &kind, sizeof(kind)));
  OPTIMUS_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32, sizeof(f32)));
  OPTIMUS_CHECK_CUBLAS(
      cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e.bias, sizeof(e.bias)));
  if (e.kind == LtEpilogue::Kind::bias_gelu) {
    OPTIMUS_CHECK_CUBLAS(
        cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &e.pre, sizeof(e.pre)));
    OPTIMUS_CHECK_CUBLAS(
        cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &e.ld_pre, sizeof(e.ld_pre)));
    OPTIMUS_CHECK_CUBLAS(
        cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &f32, sizeof(f32)));
  }
  return true;
}

}  // namespace

bool LtGemm::run(GemmPrecision precision, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                 float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb, float beta, void* c,
                 std::int64_t ldc, cudaStream_t stream, const LtEpilogue& epilogue, const LtBatch& batch) {
  OPTIMUS_CHECK(m > 0 && n > 0 && k > 0, "LtGemm: empty product ", m, "x", k, " * ", k, "x", n);
  const bool bf16_in = precision == GemmPrecision::bf16 || precision == GemmPrecision::bf16_to_f32;
  const cudaDataType_t in = bf16_in ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType_t out = precision == GemmPrecision::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      precision == GemmPrecision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  // Column-major view: C^T [n, m] = op(B)^T [n, k] * op(A)^T [k, m]. The first operand is B's storage, which
  // column-major is [n, k] when B is not transposed (row-major [k, n]) and [k, n] when it is. Row-major C's columns
  // are the column-major result's rows: a bias per column of C is cuBLASLt's bias per row of D, of length n.
  OPTIMUS_CHECK(batch.count >= 1 && batch.count <= (std::int64_t{1} << 31) - 1, "LtGemm: batch of ", batch.count);
  const Layout first(in, trans_b ? k : n, trans_b ? n : k, ldb, batch.count, batch.stride_b);
  const Layout second(in, trans_a ? m : k, trans_a ? k : m, lda, batch.count, batch.stride_a);
  const Layout result(out, n, m, ldc, batch.count, batch.stride_c);
  const Operation op(compute, trans_b, trans_a);
  const bool fused = epilogue.kind != LtEpilogue::Kind::none;
  if (!set_epilogue(op, precision, epilogue)) return false;
  const Preference preference(workspace_bytes_);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, op.desc, first.desc, second.desc, result.desc,
                                                               result.desc, preference.desc, 1, &heuristic, &found);
  if (fused && (status != CUBLAS_STATUS_SUCCESS || found == 0)) return false;  // not offered: the caller applies it
  OPTIMUS_CHECK_CUBLAS(status);
  OPTIMUS_CHECK(found > 0, "LtGemm: cuBLASLt has no algorithm for ", m, "x", n, "x", k);
  OPTIMUS_CHECK_CUBLAS(cublasLtMatmul(handle_, op.desc, &alpha, b, first.desc, a, second.desc, &beta, c, result.desc,
                                      c, result.desc, &heuristic.algo, workspace_, workspace_bytes_, stream));
  return true;
}

}  // namespace optimus::cuda

// Row-major GEMM on NVIDIA GPUs through cuBLASLt: C[m, n] = alpha op(A) op(B) + beta C, with
//   f32  : f32 operands, f32 compute
//   tf32 : f32 operands, TF32 tensor-core compute with f32 accumulation
//   bf16 : bf16 operands and output, f32 accumulation
//   bf16_to_f32 : bf16 operands, f32 output, f32 accumulation (mixed-precision products into f32 activations)
// Row-major operands are handed to cuBLASLt (column-major) as the transposed problem C^T = op(B)^T op(A)^T.
#pragma once

#include <cublasLt.h>

#include <cstdint>

#include "optimus/cuda/runtime.hpp"

#define OPTIMUS_CHECK_CUBLAS(call)                                                                      \
  do {                                                                                                  \
    const cublasStatus_t optimus_cublas_status_ = (call);                                               \
    OPTIMUS_CHECK(optimus_cublas_status_ == CUBLAS_STATUS_SUCCESS, #call, " failed: ",                  \
                  cublasGetStatusName(optimus_cublas_status_), ": ", cublasGetStatusString(optimus_cublas_status_)); \
  } while (0)

namespace optimus::cuda {

enum class GemmPrecision { f32, tf32, bf16, bf16_to_f32 };

// What cuBLASLt applies to the row-major result C[m, n] in the GEMM's own kernel: nothing; bias[n] added to every
// row (CUBLASLT_EPILOGUE_BIAS); or the bias, then GELU (tanh form) with its input written to pre[m, n], leading
// dimension ld_pre (CUBLASLT_EPILOGUE_GELU_AUX_BIAS). f32 bias and pre: the f32 output precisions only.
struct LtEpilogue {
  enum class Kind { none, bias, bias_gelu };
  Kind kind = Kind::none;
  const float* bias = nullptr;
  float* pre = nullptr;
  std::int64_t ld_pre = 0;
};

// A strided batch: `count` products, matrix i of each operand `stride_*` elements after matrix i-1.
struct LtBatch {
  std::int64_t count = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

class LtGemm {
 public:
  // The workspace comes from `allocator` once, at construction.
  explicit LtGemm(DeviceAllocator& allocator, std::size_t workspace_bytes = std::size_t{32} << 20);
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm();

  // a: op(A) is [m, k]; b: op(B) is [k, n]; c: [m, n]; leading dimensions in elements; device pointers.
  // With a batch, the same product for each of its matrices (a, b, c: matrix 0). With an epilogue, returns false without running anything when cuBLASLt offers no algorithm for it (or its
  // operands do not meet cuBLASLt's alignment): the caller then applies it after a plain GEMM. Otherwise true.
  bool run(GemmPrecision precision, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
           float alpha, const void* a, std::int64_t lda, const void* b, std::int64_t ldb, float beta, void* c,
           std::int64_t ldc, cudaStream_t stream, const LtEpilogue& epilogue = {}, const LtBatch& batch = {});

 private:
  DeviceAllocator* allocator_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_;
};

}  // namespace optimus::cuda

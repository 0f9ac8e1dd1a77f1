// The GEMM engine of a GPU (optimus/core/gemm_engine.hpp): cuBLASLt. Preparing a matmul builds its descriptors —
// matmul (compute type, transposes, epilogue), the four layouts, and a preference with the workspace and the
// alignments the buffers promise — and searches its algorithm once; running it sets the epilogue's pointers and calls
// cublasLtMatmul on the stream. Everything before these calls (the row-major to column-major description, the
// alignment promises, the epilogue rules, the plan cache) is the device-generic GemmEngine's, which CI runs on the
// simulated device; this file is the part only a GPU executes. libcublasLt is not linked: it is opened when the first
// LtGemm is built (cuda/cublaslt_library.hpp), so a program that never asks for a GPU never maps it.
#pragma once

#include <cublasLt.h>

#include <string>

#include "optimus/core/gemm_engine.hpp"
#include "optimus/cuda/runtime.hpp"

// A cuBLASLt call that fails throws optimus::Error naming the call and cuBLAS's status (cublas_status_text).
#define OPTIMUS_CHECK_CUBLAS(call)                                                                      \
  do {                                                                                                  \
    const cublasStatus_t optimus_cublas_status_ = (call);                                               \
    OPTIMUS_CHECK(optimus_cublas_status_ == CUBLAS_STATUS_SUCCESS, #call, " failed: ",                  \
                  ::optimus::cuda::cublas_status_text(optimus_cublas_status_));                         \
  } while (0)

namespace optimus::cuda {

// A cuBLAS status as "NAME: description", from the loaded libcublasLt (a status comes from a call into it, so it is
// loaded by then). Declared here rather than the table of cuBLASLt's functions, which stays internal to src/.
std::string cublas_status_text(cublasStatus_t status);

class LtGemm final : public GemmEngine {
 public:
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
  // The workspace comes from `allocator` (memory of a CUDA device) once, at construction.
  explicit LtGemm(DeviceAllocator& allocator);
  ~LtGemm() override;

 protected:
  std::unique_ptr<Plan> prepare(const lt::Matmul& matmul, const lt::Pointers& first) override;
  void execute(const Plan& plan, const lt::Matmul& matmul, const lt::Pointers& pointers,
               DeviceStream& stream) override;

 private:
  cublasLtHandle_t handle_ = nullptr;
};

}  // namespace optimus::cuda

// cuBLASLt opened on first use (cublaslt_library.hpp), and the status text of OPTIMUS_CHECK_CUBLAS
// (optimus/cuda/lt_gemm.hpp). OPTIMUS_CUDA_MAJOR_VERSION and OPTIMUS_CUDA_LIBRARY_DIR come from the toolkit CMake
// found (cuda/CMakeLists.txt).
#include "cublaslt_library.hpp"

#include <string>
#include <utility>

#include "optimus/core/error.hpp"
#include "optimus/cuda/lt_gemm.hpp"

#if !defined(OPTIMUS_CUDA_MAJOR_VERSION) || !defined(OPTIMUS_CUDA_LIBRARY_DIR)
#error "OPTIMUS_CUDA_MAJOR_VERSION and OPTIMUS_CUDA_LIBRARY_DIR (the CUDA toolkit's) are set by cuda/CMakeLists.txt"
#endif

namespace optimus::cuda::detail {
namespace {

::optimus::detail::DynamicLibrary open_cublaslt() {
  const std::string soname = cublaslt_soname();
  return ::optimus::detail::DynamicLibrary({soname, std::string(OPTIMUS_CUDA_LIBRARY_DIR) + "/" + soname},
                                           "cuBLASLt GEMMs on a CUDA device");
}

}  // namespace

CublasLt::CublasLt(::optimus::detail::DynamicLibrary lib) : library(std::move(lib)) {
  OPTIMUS_RESOLVE(cublasLtGetStatusName);
  OPTIMUS_RESOLVE(cublasLtGetStatusString);
  OPTIMUS_RESOLVE(cublasLtCreate);
  OPTIMUS_RESOLVE(cublasLtDestroy);
  OPTIMUS_RESOLVE(cublasLtMatmulDescCreate);
  OPTIMUS_RESOLVE(cublasLtMatmulDescDestroy);
  OPTIMUS_RESOLVE(cublasLtMatmulDescSetAttribute);
  OPTIMUS_RESOLVE(cublasLtMatrixLayoutCreate);
  OPTIMUS_RESOLVE(cublasLtMatrixLayoutDestroy);
  OPTIMUS_RESOLVE(cublasLtMatrixLayoutSetAttribute);
  OPTIMUS_RESOLVE(cublasLtMatmulPreferenceCreate);
  OPTIMUS_RESOLVE(cublasLtMatmulPreferenceDestroy);
  OPTIMUS_RESOLVE(cublasLtMatmulPreferenceSetAttribute);
  OPTIMUS_RESOLVE(cublasLtMatmulAlgoGetHeuristic);
  OPTIMUS_RESOLVE(cublasLtMatmul);
}

std::string cublaslt_soname() { return "libcublasLt.so." + std::to_string(OPTIMUS_CUDA_MAJOR_VERSION); }

const CublasLt& cublaslt() {
  // Built once, by the first caller (C++ serialises the initialisation; one that throws leaves it for the next), and
  // never destroyed.
  static const CublasLt& table = *new CublasLt(open_cublaslt());
  return table;
}

}  // namespace optimus::cuda::detail

namespace optimus::cuda {

std::string cublas_status_text(cublasStatus_t status) {
  const detail::CublasLt& lt = detail::cublaslt();
  return std::string(lt.cublasLtGetStatusName(status)) + ": " + lt.cublasLtGetStatusString(status);
}

}  // namespace optimus::cuda

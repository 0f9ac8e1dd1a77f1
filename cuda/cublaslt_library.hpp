// Internal to cuda: cuBLASLt, opened when a GEMM on a GPU first needs it instead of linked, so that a program maps
// libcublasLt only on a device path (a CPU run never does). CublasLt holds every function of libcublasLt that
// lt_gemm.cpp and OPTIMUS_CHECK_CUBLAS (optimus/cuda/lt_gemm.hpp) call, under its C name and with the signature
// cublasLt.h declares; the status texts come from libcublasLt too, so libcublas is not needed at all.
#pragma once

#include <cublasLt.h>

#include <string>

#include "optimus/core/dynamic_library.hpp"

namespace optimus::cuda::detail {

struct CublasLt {
  // Looks up every function below in `library`; throws optimus::Error naming the first one missing.
  explicit CublasLt(::optimus::detail::DynamicLibrary library);

  ::optimus::detail::DynamicLibrary library;
  decltype(&::cublasLtGetStatusName) cublasLtGetStatusName;
  decltype(&::cublasLtGetStatusString) cublasLtGetStatusString;
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtDestroy) cublasLtDestroy;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) cublasLtMatrixLayoutSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
};

// The soname cuBLASLt is opened by: libcublasLt.so.<the major version of the CUDA toolkit built with>.
std::string cublaslt_soname();

// cuBLASLt, opened on the first call — by soname, then from the toolkit's library directory — and kept open until the
// process ends (a loaded library is process-wide; never closing it keeps it valid for objects destroyed at exit).
// Thread-safe. Throws optimus::Error naming the library and why it did not load; a later call tries again.
const CublasLt& cublaslt();

}  // namespace optimus::cuda::detail

// OPTIMUS_CHECK_CUDA: a CUDA runtime call that fails throws optimus::Error naming the call and CUDA's error.
// C++17-clean, for the .cu files as well as the C++20 sources.
#pragma once

#include <cuda_runtime.h>

#include "optimus/core/error.hpp"

#define OPTIMUS_CHECK_CUDA(call)                                                                       \
  do {                                                                                                 \
    const cudaError_t optimus_cuda_status_ = (call);                                                   \
    OPTIMUS_CHECK(optimus_cuda_status_ == cudaSuccess, #call, " failed: ", cudaGetErrorName(optimus_cuda_status_), \
                  ": ", cudaGetErrorString(optimus_cuda_status_));                                     \
  } while (0)

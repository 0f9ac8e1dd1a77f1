// OPTIMUS_HOST_DEVICE marks a function that compiles for the host and, under nvcc, for the GPU: the arithmetic the
// CPU kernels (and through them the simulated device) share with the CUDA kernels. Only the preprocessor can say
// which compiler is reading the code, hence a macro.
#pragma once

#if defined(__CUDACC__)
#define OPTIMUS_HOST_DEVICE __host__ __device__
#else
#define OPTIMUS_HOST_DEVICE
#endif

# External dependencies: Eigen (kernels and reference), MPI (optional), CUDA (optional), ScaLAPACK (bench only).
include_guard(GLOBAL)

find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(Threads REQUIRED)

if(OPTIMUS_WITH_MPI)
  find_package(MPI REQUIRED COMPONENTS CXX)
endif()

# CUDA: the GPU backend (device tensors, cuBLASLt kernels, NCCL) is the GPU issue's work; this
# resolves the option now so that the configuration is stable and a wrong request stops here.
set(OPTIMUS_HAVE_CUDA OFF)
if(NOT _optimus_cuda MATCHES "^(OFF|FALSE|NO|0)$")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(OPTIMUS_HAVE_CUDA ON)
  elseif(_optimus_cuda MATCHES "^(ON|TRUE|YES|1)$")
    message(FATAL_ERROR "OPTIMUS_WITH_CUDA=ON but no CUDA toolkit was found (set CUDAToolkit_ROOT)")
  endif()
endif()
set(OPTIMUS_HAVE_NCCL OFF)
if(OPTIMUS_HAVE_CUDA AND NOT _optimus_nccl MATCHES "^(OFF|FALSE|NO|0)$")
  find_library(OPTIMUS_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
  if(OPTIMUS_NCCL_LIBRARY)
    set(OPTIMUS_HAVE_NCCL ON)
  elseif(_optimus_nccl MATCHES "^(ON|TRUE|YES|1)$")
    message(FATAL_ERROR "OPTIMUS_WITH_NCCL=ON but libnccl was not found")
  endif()
elseif(_optimus_nccl MATCHES "^(ON|TRUE|YES|1)$")
  message(FATAL_ERROR "OPTIMUS_WITH_NCCL=ON but the CUDA backend is off (no toolkit found)")
endif()

# CPU GEMM: OpenBLAS's cblas (Debian: libopenblas-dev) or Eigen's own kernels.
set(OPTIMUS_GEMM_BACKEND eigen)
if(NOT OPTIMUS_CPU_GEMM STREQUAL "eigen")
  find_library(OPTIMUS_OPENBLAS_LIBRARY NAMES openblas PATH_SUFFIXES openblas-pthread openblas-openmp openblas-serial)
  find_path(OPTIMUS_OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread
            x86_64-linux-gnu/openblas-openmp x86_64-linux-gnu/openblas-serial)
  if(OPTIMUS_OPENBLAS_LIBRARY AND OPTIMUS_OPENBLAS_INCLUDE_DIR)
    set(OPTIMUS_GEMM_BACKEND openblas)
  elseif(OPTIMUS_CPU_GEMM STREQUAL "openblas")
    message(FATAL_ERROR "OPTIMUS_CPU_GEMM=openblas but OpenBLAS (libopenblas-dev) was not found")
  endif()
endif()

set(OPTIMUS_HAVE_SCALAPACK OFF)
if(OPTIMUS_WITH_SCALAPACK AND OPTIMUS_WITH_MPI AND OPTIMUS_BUILD_BENCH)
  find_library(OPTIMUS_SCALAPACK_LIBRARY NAMES scalapack-openmpi scalapack)
  find_package(BLAS QUIET)
  if(OPTIMUS_SCALAPACK_LIBRARY AND BLAS_FOUND)
    set(OPTIMUS_HAVE_SCALAPACK ON)
  endif()
endif()

message(STATUS "Optimus: CPU GEMM=${OPTIMUS_GEMM_BACKEND} MPI=${OPTIMUS_WITH_MPI} CUDA toolkit=${OPTIMUS_HAVE_CUDA} NCCL=${OPTIMUS_HAVE_NCCL} "
               "ScaLAPACK(bench)=${OPTIMUS_HAVE_SCALAPACK}")

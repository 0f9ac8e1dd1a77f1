# External dependencies: Eigen (kernels and reference), MPI (optional), CUDA (optional), ScaLAPACK (bench only).
include_guard(GLOBAL)

find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(Threads REQUIRED)

if(OPTIMUS_WITH_MPI)
  find_package(MPI REQUIRED COMPONENTS CXX)
endif()

# CUDA: the GPU backend (device memory, cuBLASLt GEMM, CUDA kernels) and the NCCL communicator. AUTO builds
# them wherever the toolkit is found; the programs then run on machines without a GPU too, and GPU tests skip.
set(OPTIMUS_HAVE_CUDA OFF)
if(NOT _optimus_cuda MATCHES "^(OFF|FALSE|NO|0)$")
  if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND CUDAToolkit_NVCC_EXECUTABLE)
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures (90: Hopper, H100/H200)")
    endif()
    # The CUDA runtime linked statically (CUDA::cudart_static), so that a program maps no CUDA library as it loads:
    # the static runtime opens the driver (libcuda.so.1) on its first call, and cuBLASLt and NCCL are opened on first
    # use too (cuda/cublaslt_library.hpp, cuda/nccl_library.hpp). One runtime in a process: the static one.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    enable_language(CUDA)
    set(OPTIMUS_HAVE_CUDA ON)
  elseif(_optimus_cuda MATCHES "^(ON|TRUE|YES|1)$")
    message(FATAL_ERROR "OPTIMUS_WITH_CUDA=ON but no CUDA toolkit with nvcc was found (set CUDAToolkit_ROOT)")
  endif()
endif()
set(OPTIMUS_HAVE_NCCL OFF)
set(OPTIMUS_NCCL_VERSION "")
if(OPTIMUS_HAVE_CUDA AND NOT _optimus_nccl MATCHES "^(OFF|FALSE|NO|0)$")
  include(OptimusNcclVersion)
  find_library(OPTIMUS_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
               /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu)
  find_path(OPTIMUS_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include)
  if(OPTIMUS_NCCL_LIBRARY AND OPTIMUS_NCCL_INCLUDE_DIR)
    optimus_nccl_version("${OPTIMUS_NCCL_INCLUDE_DIR}/nccl.h" OPTIMUS_NCCL_VERSION)
    optimus_nccl_check("${OPTIMUS_NCCL_VERSION}" _optimus_nccl_ok _optimus_nccl_why)
    if(_optimus_nccl_ok)
      set(OPTIMUS_HAVE_NCCL ON)
    elseif(_optimus_nccl MATCHES "^(ON|TRUE|YES|1)$")
      message(FATAL_ERROR "OPTIMUS_WITH_NCCL=ON but ${OPTIMUS_NCCL_INCLUDE_DIR}/nccl.h: ${_optimus_nccl_why}")
    else()
      message(STATUS "Optimus: not using NCCL at ${OPTIMUS_NCCL_INCLUDE_DIR}: ${_optimus_nccl_why}")
    endif()
  elseif(_optimus_nccl MATCHES "^(ON|TRUE|YES|1)$")
    message(FATAL_ERROR "OPTIMUS_WITH_NCCL=ON but nccl.h or libnccl was not found")
  endif()
elseif(_optimus_nccl MATCHES "^(ON|TRUE|YES|1)$")
  message(FATAL_ERROR "OPTIMUS_WITH_NCCL=ON but the CUDA backend is off (no toolkit found)")
endif()

# CPU GEMM: OpenBLAS's cblas (Debian: libopenblas-dev) or Eigen's own kernels. Not Debian's serial OpenBLAS
# (libopenblas-serial-dev): it is built without locking, and in-process ranks (threads) calling it at once share its
# working buffer and corrupt each other's products; the pthreads variant with OPENBLAS_NUM_THREADS=1 is safe. The
# build's RUNPATH names the directory found, so the binaries load that variant whatever Debian's alternative says.
set(OPTIMUS_GEMM_BACKEND eigen)
if(NOT OPTIMUS_CPU_GEMM STREQUAL "eigen")
  find_library(OPTIMUS_OPENBLAS_LIBRARY NAMES openblas PATH_SUFFIXES openblas-pthread openblas-openmp)
  find_path(OPTIMUS_OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread
            x86_64-linux-gnu/openblas-openmp)
  if(OPTIMUS_OPENBLAS_LIBRARY AND OPTIMUS_OPENBLAS_INCLUDE_DIR)
    set(OPTIMUS_GEMM_BACKEND openblas)
  elseif(OPTIMUS_CPU_GEMM STREQUAL "openblas")
    message(FATAL_ERROR "OPTIMUS_CPU_GEMM=openblas but OpenBLAS (libopenblas-dev) was not found")
  endif()
endif()

set(OPTIMUS_HAVE_SCALAPACK OFF)
if(OPTIMUS_WITH_SCALAPACK AND OPTIMUS_WITH_MPI AND OPTIMUS_BUILD_BENCH)
  find_library(OPTIMUS_SCALAPACK_LIBRARY NAMES scalapack-openmpi scalapack)
  # ScaLAPACK's BLAS: the OpenBLAS found above, else the system's. ScaLAPACK needs libblas.so.3 and liblapack.so.3,
  # which Debian's alternatives point at one OpenBLAS variant; the bench names those of the variant found above, so that
  # its RUNPATH loads them (and not another variant's, which would miss symbols of the libopenblas.so.0 loaded).
  if(OPTIMUS_GEMM_BACKEND STREQUAL "openblas")
    get_filename_component(openblas_dir ${OPTIMUS_OPENBLAS_LIBRARY} DIRECTORY)
    find_library(OPTIMUS_OPENBLAS_BLAS NAMES blas PATHS ${openblas_dir} NO_DEFAULT_PATH)
    find_library(OPTIMUS_OPENBLAS_LAPACK NAMES lapack PATHS ${openblas_dir} NO_DEFAULT_PATH)
    if(OPTIMUS_OPENBLAS_BLAS AND OPTIMUS_OPENBLAS_LAPACK)
      set(OPTIMUS_SCALAPACK_BLAS ${OPTIMUS_OPENBLAS_LAPACK} ${OPTIMUS_OPENBLAS_BLAS} ${OPTIMUS_OPENBLAS_LIBRARY})
    endif()
  else()
    find_package(BLAS QUIET)
    set(OPTIMUS_SCALAPACK_BLAS ${BLAS_LIBRARIES})
  endif()
  if(OPTIMUS_SCALAPACK_LIBRARY AND OPTIMUS_SCALAPACK_BLAS)
    set(OPTIMUS_HAVE_SCALAPACK ON)
  endif()
endif()

message(STATUS "Optimus: CPU GEMM=${OPTIMUS_GEMM_BACKEND} MPI=${OPTIMUS_WITH_MPI} CUDA toolkit=${OPTIMUS_HAVE_CUDA} "
               "NCCL=${OPTIMUS_HAVE_NCCL} ${OPTIMUS_NCCL_VERSION} ScaLAPACK(bench)=${OPTIMUS_HAVE_SCALAPACK}")

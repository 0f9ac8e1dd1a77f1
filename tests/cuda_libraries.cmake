# test_cuda_libraries: the CUDA backend's libraries (cuBLASLt, NCCL) are opened on first use, not linked
# (tests/core/test_cuda_libraries.cpp). Built with CUDA only; runs without a GPU. Included from tests/CMakeLists.txt.
if(OPTIMUS_HAVE_CUDA)
  optimus_add_test(test_cuda_libraries SOURCES ${CMAKE_CURRENT_LIST_DIR}/core/test_cuda_libraries.cpp)
  # The CUDA backend's loaders are private to it (cuda/cublaslt_library.hpp, cuda/nccl_library.hpp): the test
  # reads them from there, white-box (docs/design.md's module table).
  target_include_directories(test_cuda_libraries PRIVATE ${PROJECT_SOURCE_DIR})
  if(OPTIMUS_HAVE_NCCL)
    target_include_directories(test_cuda_libraries PRIVATE ${OPTIMUS_NCCL_INCLUDE_DIR})
    target_compile_definitions(test_cuda_libraries PRIVATE OPTIMUS_HAVE_NCCL=1)
  endif()
endif()

# The NCCL version check of the build (cmake/OptimusNcclVersion.cmake) on headers written here: 2.28 is used, 2.17
# (no ncclCommSplit) and a header without a version are not. Run as `cmake -DSOURCE_DIR=... -DWORK_DIR=... -P`.
list(APPEND CMAKE_MODULE_PATH "${SOURCE_DIR}/cmake")
include(OptimusNcclVersion)

function(expect header_text expected_version expected_ok)
  file(WRITE "${WORK_DIR}/nccl.h" "${header_text}")
  optimus_nccl_version("${WORK_DIR}/nccl.h" version)
  optimus_nccl_check("${version}" ok why)
  if(NOT version STREQUAL expected_version OR NOT ok STREQUAL expected_ok)
    message(FATAL_ERROR "nccl.h '${header_text}': version '${version}' ok ${ok} (${why}); expected '${expected_version}' ${expected_ok}")
  endif()
  message(STATUS "nccl.h declaring '${version}': usable ${ok} ${why}")
endfunction()

expect("#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n" "2.28" TRUE)
expect("#define NCCL_MAJOR 2\n#define NCCL_MINOR 18\n" "2.18" TRUE)
expect("#define NCCL_MAJOR 2\n#define NCCL_MINOR 17\n" "2.17" FALSE)
expect("#define NCCL_MAJOR 3\n#define NCCL_MINOR 0\n" "3.0" TRUE)
expect("/* no version */\n" "" FALSE)

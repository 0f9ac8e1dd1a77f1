# Out of memory under address-space limits, never a hang.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${mpi_launch}.
# Out of memory ends the job with the request named, never a hang (tests/core/memory_limit.cpp). An address-space
# limit and AddressSanitizer's shadow memory do not mix: not in sanitizer builds.
if(NOT OPTIMUS_SANITIZE)
  add_executable(memory_limit core/memory_limit.cpp)
  target_link_libraries(memory_limit PRIVATE optimus::operator_new optimus::optimus)
  optimus_target_defaults(memory_limit)
  # Any allocation, not only a tensor's, names its bytes (the programs' operator new).
  optimus_expect_failure(memory_limit_vector
                         "memory_limit: error: out of memory: a request for 268435456 bytes .0.25 GiB. failed .this process's address space is limited to [0-9.]+ GiB: ulimit -v."
                         $<TARGET_FILE:memory_limit> vector)
  set_tests_properties(memory_limit_vector PROPERTIES TIMEOUT 30)
  optimus_expect_failure(memory_limit_exhaust
                         "memory_limit: error: host allocation of 16777216 bytes for a tensor of shape .2048, 2048. failed.* a 256.3 product then ran: 0 wrong elements"
                         ${mpi_launch} 1 $<TARGET_FILE:memory_limit> exhaust)
  set_tests_properties(memory_limit_exhaust PROPERTIES TIMEOUT 30)
  if(OPTIMUS_GEMM_BACKEND STREQUAL "openblas")  # one rank short of OpenBLAS's buffer: every rank stops at once
    optimus_expect_failure(memory_limit_buffer_np4
                           "memory_limit: error: out of memory: OpenBLAS needs a working buffer of about [0-9]+ bytes"
                           ${mpi_launch} 4 $<TARGET_FILE:memory_limit> buffer --limited-rank 2)
    set_tests_properties(memory_limit_buffer_np4 PROPERTIES TIMEOUT 30)
    # In-process ranks multiply on threads of their own, each with its own buffer: 8 of them where 4 fit.
    optimus_expect_failure(memory_limit_buffer_threads
                           "memory_limit: error: out of memory: OpenBLAS needs a working buffer of about [0-9]+ bytes for each of the 8 threads"
                           $<TARGET_FILE:memory_limit> threads)
    set_tests_properties(memory_limit_buffer_threads PROPERTIES TIMEOUT 30)
  endif()
endif()

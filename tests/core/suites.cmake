# core's suites (included from tests/CMakeLists.txt, in its scope): the errors, dtypes, tensors, RNG, operations,
# kernels, the CLI tables, memory; every program's option table; the programs' operator new.
if(TARGET optimus_bench_options AND TARGET optimus_program_options)  # every program's option table
  optimus_add_test(test_program_options SOURCES core/test_program_options.cpp
                   LIBS optimus_bench_options optimus_program_options)
endif()
optimus_add_test(test_core SOURCES core/test_error.cpp core/test_dtype.cpp core/test_tensor.cpp core/test_rng.cpp core/test_ops.cpp
                 core/test_element_math.cpp core/test_flash_attention.cpp
                 core/test_kernels.cpp core/test_blas_kernel.cpp
                 core/test_cli.cpp core/test_memory.cpp core/test_caching_allocator.cpp)
if(NOT OPTIMUS_SANITIZE)  # the sanitizers keep their own operator new (programs/operator_new.cpp)
  optimus_add_test(test_operator_new SOURCES core/test_operator_new.cpp LIBS optimus::operator_new)
endif()

# layers' suites (included from tests/CMakeLists.txt, in its scope): every layer forward and backward against the
# reference, in-process and under MPI.
optimus_add_test(test_layers_in_process SOURCES layers/test_layers_in_process.cpp layers/test_finite.cpp
                 layers/test_split_backward.cpp
                 LIBS optimus_test_cases)
if(OPTIMUS_SANITIZE)  # the cases that train whole models repeatedly at q <= 2: the layer and block cases take q = 3
  target_compile_definitions(test_layers_in_process PRIVATE OPTIMUS_TEST_REPEATED_Q=2)
endif()
if(OPTIMUS_WITH_MPI)
  optimus_add_test(test_layers_mpi SOURCES layers/test_layers_mpi.cpp LIBS optimus_test_cases RANKS 1 4 8 9 16)
endif()

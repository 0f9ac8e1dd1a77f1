# comm's suites (included from tests/CMakeLists.txt, in its scope): every collective, in-process and under MPI.
optimus_add_test(test_in_process SOURCES comm/test_in_process.cpp LIBS optimus_test_cases)
if(OPTIMUS_WITH_MPI)
  optimus_add_test(test_comm_mpi SOURCES comm/test_mpi.cpp LIBS optimus_test_cases RANKS 1 4 9 16)
endif()

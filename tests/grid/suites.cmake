# grid's suites (included from tests/CMakeLists.txt, in its scope): the grid and SUMMA, in-process and under MPI, and
# overlapped SUMMA.
optimus_add_test(test_grid_in_process SOURCES grid/test_grid_in_process.cpp grid/test_mesh.cpp LIBS optimus_test_cases)
if(OPTIMUS_WITH_MPI)
  optimus_add_test(test_grid_mpi SOURCES grid/test_grid_mpi.cpp LIBS optimus_test_cases RANKS 1 4 9 16)
endif()
if(OPTIMUS_WITH_MPI)
  optimus_add_test(test_overlap SOURCES grid/test_overlap.cpp LIBS optimus_test_cases RANKS 1 4 9)
else()
  optimus_add_test(test_overlap SOURCES grid/test_overlap.cpp LIBS optimus_test_cases)
endif()

# The simulated device's suites, offload's, and the GPU's where there is one.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${mpi_launch}, optimus_add_test.
# The simulated device (label sim): every device path in CI — its own rules, then the device cases of
# tests/device/device_cases.hpp on grids sharing one device and on a device per rank over the simulated NCCL, in-process
# and under mpiexec (one process per device).
# The device grids at q = 3 (nine ranks on one device) run on their own, labelled long: the Release configuration runs
# them, the sanitizers take q = 1 and 2 (their host paths at q = 3 are test_layers_in_process's).
optimus_add_test(test_sim SOURCES device/test_sim.cpp device/sim_comm_cases.cpp device/weight_copy_cases.cpp LIBS optimus_test_cases LABELS sim
                 ARGS "--test-case-exclude=*every case at q = 3*")
add_test(NAME test_sim_q3 COMMAND test_sim "--test-case=*every case at q = 3*")
set_tests_properties(test_sim_q3 PROPERTIES LABELS "sim;long" ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1"
                     TIMEOUT 600)
# Offloading (optimizer, spilled blocks). Run on their own, labelled long (the Release configuration runs them, the
# others leave them out): spilling on other grids (q = 2, dp = 2; q = 1 and 4 processes run everywhere) and the
# capacity cases — GPTs whose parameters exceed the device, large enough to dwarf every workspace.
optimus_add_test(test_offload SOURCES device/test_offload.cpp LIBS optimus_test_cases LABELS sim
                 ARGS "--test-case-exclude=*exceed*,*spilling on grids*")
add_test(NAME test_offload_grids COMMAND test_offload "--test-case=*spilling on grids*")
set_tests_properties(test_offload_grids PROPERTIES LABELS "sim;long" ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1"
                     TIMEOUT 600)
add_test(NAME test_offload_capacity COMMAND test_offload "--test-case=*exceed*")
set_tests_properties(test_offload_capacity PROPERTIES LABELS "sim;long" ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1"
                     TIMEOUT 600)
if(OPTIMUS_WITH_MPI)
  # Release only (ten minutes under ASan): the sanitizers run the same device cases in-process, in test_sim at q = 1, 2.
  optimus_add_test(test_sim_mpi SOURCES device/test_sim_mpi.cpp LIBS optimus_test_cases RANKS 1 4 8 9 LABELS sim
                   SANITIZED_RANKS ARGS "--test-case-exclude=*exceed*")
  if(TEST test_sim_mpi_np4)
    add_test(NAME test_sim_mpi_capacity_np4
             COMMAND ${MPIEXEC_EXECUTABLE} ${OPTIMUS_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} 4 $<TARGET_FILE:test_sim_mpi>
                     "--test-case=*exceed*")
    set_tests_properties(test_sim_mpi_capacity_np4 PROPERTIES LABELS "sim;mpi;long" PROCESSORS 2
                         ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1" TIMEOUT 600)
  endif()
endif()
# The same device cases on a GPU (label gpu): without a CUDA device the suite exits 77, which ctest reports as skipped.
include(cuda_libraries.cmake)  # CUDA's libraries opened on first use, checked without a GPU
if(OPTIMUS_HAVE_CUDA)
  add_executable(test_cuda device/test_cuda.cpp)  # its own main: it skips (77) without a GPU
  target_link_libraries(test_cuda PRIVATE optimus_test_cases)
  optimus_target_defaults(test_cuda)
  add_test(NAME test_cuda COMMAND test_cuda)
  set_tests_properties(test_cuda PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
# The build's NCCL version check on headers of known versions.
add_test(NAME cmake_nccl_version COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
         -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/nccl_version.cmake)

if(OPTIMUS_WITH_MPI)
  # The MPI world's case at 1, 2 and 4 ranks (under the sanitizers at p = 2, which takes every split its layers make);
  # the in-process cases once, in a test of their own (every MPI rank would run them again).
  optimus_add_test(test_megatron SOURCES layers/test_megatron.cpp LIBS optimus_test_cases RANKS 1 2 4
                   SANITIZED_RANKS 2 ARGS "--test-case=*MPI world*")
  if(OPTIMUS_SANITIZE)  # the odd split (p = 3) alone: np2 above runs the cases at p = 2 under the sanitizers
    add_test(NAME test_megatron_in_process COMMAND test_megatron "--test-case=*at p = 3 in-process*")
  else()
    add_test(NAME test_megatron_in_process COMMAND test_megatron "--test-case-exclude=*MPI world*")
  endif()
  set_tests_properties(test_megatron_in_process PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1"
                       TIMEOUT 600)
endif()

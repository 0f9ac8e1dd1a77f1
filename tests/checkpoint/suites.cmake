# checkpoint's suites (included from tests/CMakeLists.txt, in its scope): checkpoints, files, save directories, and a
# rank killed in the middle of a save.
optimus_add_test(test_checkpoint SOURCES checkpoint/test_checkpoint.cpp checkpoint/test_checkpoint_pipeline.cpp
                 checkpoint/test_checkpoint_blocks.cpp checkpoint/test_files.cpp)
if(OPTIMUS_WITH_MPI)
  # SIGKILL of one MPI rank in the middle of a save: the previous checkpoint still loads and verifies.
  add_executable(checkpoint_fault checkpoint/checkpoint_fault.cpp)
  target_link_libraries(checkpoint_fault PRIVATE optimus::optimus)
  optimus_target_defaults(checkpoint_fault)
  set(fault_dir ${CMAKE_CURRENT_BINARY_DIR}/killed_save)
  set(fault_launch ${MPIEXEC_EXECUTABLE} ${OPTIMUS_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} 4 $<TARGET_FILE:checkpoint_fault>)
  add_test(NAME checkpoint_killed_rank
           COMMAND ${CMAKE_COMMAND} "-DSAVE=${fault_launch};save;${fault_dir}" "-DVERIFY=${fault_launch};verify;${fault_dir}"
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/killed_save.cmake)
  set_tests_properties(checkpoint_killed_rank PROPERTIES LABELS mpi TIMEOUT 120
                       ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endif()

# The watchdog ending an MPI job.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${mpi_launch}.
# The watchdog: ranks 1-3 do not join an all-reduce; the job ends (1 s timeout, then at once: the world's communication
# failed) with rank 0's line naming the operation, the missing ranks with their host, and that they make no MPI call,
# long before they would wake (60 s) and before rank 0's thirty other pending operations would each time out (the
# test's bound is 20 s).
add_executable(watchdog_mpi comm/watchdog_mpi.cpp)
target_link_libraries(watchdog_mpi PRIVATE optimus::optimus)
optimus_target_defaults(watchdog_mpi)
optimus_expect_failure(watchdog_mpi_np4
                       "watchdog_mpi: error on rank 0: watchdog: all_reduce #5 on the mpi communicator of 4 ranks .world ranks 0, 1, 2, 3., at its rank 0 did not complete within 1 s. not joined by ranks 1, 2, 3 .world ranks 1, 2, 3 on [^)]+.. world rank 1 has made no MPI call for [0-9.]+ s .stopped.."
                       ${mpi_launch} 4 $<TARGET_FILE:watchdog_mpi>)
set_tests_properties(watchdog_mpi_np4 PROPERTIES TIMEOUT 20)
# The same through a device communicator of processes sharing one device (collectives staged through the host).
optimus_expect_failure(watchdog_mpi_staged_np4
                       "watchdog_mpi: error on rank 0: watchdog: all_reduce #[0-9]+ on the mpi communicator of 4 ranks .world ranks 0, 1, 2, 3., at its rank 0 did not complete within 1 s. not joined by ranks 1, 2, 3 .world ranks 1, 2, 3 on [^)]+.. world rank 1 has made no MPI call for [0-9.]+ s .stopped.."
                       ${mpi_launch} 4 $<TARGET_FILE:watchdog_mpi> staged)
set_tests_properties(watchdog_mpi_staged_np4 PROPERTIES TIMEOUT 20)

# optimus_add_test(NAME SOURCES src... [RANKS n...] [SANITIZED_RANKS n...] [LIBS lib...] [LABELS label...]
#                  [ARGS arg...])
#
# Builds one doctest executable (with the MPI-aware main) and registers it with ctest once per rank
# count, as `mpiexec -np N` (oversubscribed, root allowed), never through test discovery. Tests run with
# more than 9 ranks carry the label `long`. Without RANKS (or without MPI) the test runs once, directly. ARGS go to the
# executable (e.g. a doctest filter).
#
# The label `release_only` marks what the sanitizer pass of .ci/run leaves to the Release pass (optimus_release_only):
# of an MPI suite the sanitizers run the rank counts in SANITIZED_RANKS (default 4: the same code at other grid shapes
# is the Release pass's, and the in-process suites take q = 1, 2, 3 under the sanitizers too).
include_guard(GLOBAL)

set(OPTIMUS_MPIEXEC_FLAGS --oversubscribe --allow-run-as-root --bind-to none
    CACHE STRING "Flags for mpiexec in tests (ranks share the 2 cores of CI machines)")

function(optimus_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;RANKS;SANITIZED_RANKS;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT DEFINED ARG_SANITIZED_RANKS AND NOT "SANITIZED_RANKS" IN_LIST ARG_KEYWORDS_MISSING_VALUES)
    set(ARG_SANITIZED_RANKS 4)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE optimus_test_support optimus::optimus ${ARG_LIBS})
  optimus_target_defaults(${name})
  set(env "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
  set(timeout 300)
  if(OPTIMUS_SANITIZE)
    set(timeout 1200)  # ASan/UBSan runs the same suites several times slower
  endif()
  if(NOT ARG_RANKS OR NOT OPTIMUS_WITH_MPI)
    add_test(NAME ${name} COMMAND ${name} ${ARG_ARGS})
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" ENVIRONMENT "${env}" TIMEOUT ${timeout})
    return()
  endif()
  foreach(np IN LISTS ARG_RANKS)
    if(np GREATER OPTIMUS_TEST_MAX_RANKS)
      continue()
    endif()
    set(labels ${ARG_LABELS} mpi)
    if(np GREATER 9)
      list(APPEND labels long)
    endif()
    if(NOT np IN_LIST ARG_SANITIZED_RANKS)
      list(APPEND labels release_only)
    endif()
    add_test(NAME ${name}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${OPTIMUS_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} ${np}
                     $<TARGET_FILE:${name}> ${ARG_ARGS})
    set_tests_properties(${name}_np${np} PROPERTIES LABELS "${labels}" PROCESSORS 2 ENVIRONMENT "${env}" TIMEOUT ${timeout})
  endforeach()
endfunction()

# optimus_release_only(test...): the tests the sanitizer pass leaves to the Release pass (label `release_only`), each
# because the library paths it takes are run under the sanitizers by another test (say which where it is called).
# Call it after any set_tests_properties(... LABELS ...), which replaces labels.
function(optimus_release_only)
  set_property(TEST ${ARGN} APPEND PROPERTY LABELS release_only)
endfunction()

# train_gpt's faults: a stopped rank or stage, resource limits, a text resumed on another,
# an error's one line.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${tiny_gpt}, ${mpi_launch}.
# A rank stopped in the middle of step 3 (OPTIMUS_TEST_STOP, apps/stop_fault.hpp: SIGSTOP for a process, a blocked
# thread in-process) ends the job with one line naming it, on every backend: the watchdog (--timeout 2) fires in the
# ranks that wait for it, their other pending operations are abandoned, and the job is aborted (in-process, the
# stopped thread is left running after run_in_process's grace, 2 s). The bound, 20 s, is a hang check: a wait per
# pending operation, as before, took over a minute.
# An output into the run's save directory (a checkpoint's shard, the lock) is refused before training; a step_N of the
# user's there (no metadata.json) makes the directory refused, not deleted.
set(export_into_save ${CMAKE_CURRENT_BINARY_DIR}/export_into_save)
optimus_expect_failure(example_train_gpt_export_into_save
                       "train_gpt: error: option --export '.*export_into_save/step_2/rank_00000.safetensors' is inside --save's directory '.*export_into_save'"
                       bash -c "mkdir -p \"$0/step_2\" && exec \"$@\" --save \"$0\" --export \"$0/step_2/rank_00000.safetensors\""
                       ${export_into_save} ${tiny_gpt} --in-process 4)
optimus_expect_failure(example_train_gpt_user_step_dir
                       "train_gpt: error: save directory .*user_step_dir holds step_20, which is not a checkpoint .no metadata.json."
                       bash -c "mkdir -p \"$0/step_20\" && exec \"$@\" --save \"$0\"" ${CMAKE_CURRENT_BINARY_DIR}/user_step_dir
                       ${tiny_gpt} --in-process 4)
# Resource limits, with OPENBLAS_NUM_THREADS unset (as a new user runs): under `ulimit -v` a CPU run maps no CUDA
# library and starts no OpenBLAS pool as it loads, so it trains where it fits and otherwise stops with one line; the
# planner's calibration takes OpenBLAS's buffers before its products. (They spun at 100%, aborted, or failed loading
# libcublasLt.so.) Not with the sanitizers, whose shadow memory an address-space limit does not leave room for.
if(NOT OPTIMUS_SANITIZE)
  set(limited_gpt ${CMAKE_COMMAND} -E env --unset=OPENBLAS_NUM_THREADS bash -c "ulimit -v $0 && exec \"$@\"")
  add_test(NAME example_train_gpt_address_limit
           COMMAND ${limited_gpt} 1000000 $<TARGET_FILE:train_gpt> --in-process 4 --q 2 --layers 2 --hidden 32
                   --heads 2 --seq 16 --batch 8 --steps 2 --sample 0)
  add_test(NAME example_train_gpt_address_limit_one_rank
           COMMAND ${limited_gpt} 400000 $<TARGET_FILE:train_gpt> --in-process 1 --q 1 --layers 1 --hidden 32
                   --heads 2 --seq 16 --batch 4 --steps 2 --sample 0)
  set_tests_properties(example_train_gpt_address_limit example_train_gpt_address_limit_one_rank PROPERTIES
                       TIMEOUT 60 PASS_REGULAR_EXPRESSION "final training loss")
  # In-process ranks never start MPI (Process::world), whose start needs room under `ulimit -f` and `-v`: it
  # crashed with 16 to 34 lines of Open MPI's under 1 MB of file size or 60 MB of address space.
  add_test(NAME example_train_gpt_in_process_file_limit
           COMMAND bash -c "ulimit -f 1024 && exec \"$@\"" bash $<TARGET_FILE:train_gpt> --in-process 1 --q 1 --layers 1
                   --hidden 32 --heads 2 --seq 16 --batch 4 --steps 2 --sample 0)
  set_tests_properties(example_train_gpt_in_process_file_limit PROPERTIES TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "final training loss")
  optimus_expect_failure(example_train_gpt_in_process_tiny_address_space
                         "train_gpt: error: (run_in_process: cannot start a thread|out of memory)"
                         ${limited_gpt} 60000 $<TARGET_FILE:train_gpt> --in-process 1 --q 1 --steps 2)
  if(OPTIMUS_GEMM_BACKEND STREQUAL "openblas")
    optimus_expect_failure(example_train_gpt_address_limit_short
                           "train_gpt: error: out of memory: OpenBLAS needs a working buffer of about [0-9]+ bytes for each of the 4 threads"
                           ${limited_gpt} 600000 $<TARGET_FILE:train_gpt> --in-process 4 --q 2 --steps 2)
    optimus_expect_failure(example_train_gpt_address_limit_64_ranks
                           "train_gpt: error: out of memory: OpenBLAS needs a working buffer of about [0-9]+ bytes for each of the 64 threads"
                           ${limited_gpt} 1500000 $<TARGET_FILE:train_gpt> --in-process 64 --q 1 --steps 2)
    # (620 MB: an Intel Xeon's OpenBLAS takes 4 x 135 MB and trains this under 700 MB, where an AMD EPYC's did not.)
    optimus_expect_failure(example_train_gpt_address_limit_plan
                           "train_gpt: error: (out of memory|host allocation)"
                           ${limited_gpt} 620000 $<TARGET_FILE:train_gpt> --in-process 4 --plan auto --layers 2
                           --hidden 32 --heads 2 --seq 16 --batch 64 --steps 2)
    set_tests_properties(example_train_gpt_address_limit_short example_train_gpt_address_limit_64_ranks
                         example_train_gpt_address_limit_plan PROPERTIES TIMEOUT 60)
  endif()
endif()
# A text model resumed on a text of other characters, as many of them: its ids would mean other characters (they
# used to be remapped silently). The second text is the first with every letter shifted by one.
set(other_text_dir ${CMAKE_CURRENT_BINARY_DIR}/other_text)
optimus_expect_failure(example_train_gpt_resume_other_text
                       "train_gpt: error: the checkpoint's model was trained on a text of other characters .'.*first.txt'.: id [0-9]+ is '.' .[0-9]+. there and '.' .[0-9]+. in this text"
                       bash -c "rm -rf \"$0\" && mkdir -p \"$0\" && head -c 3000 /usr/share/common-licenses/GPL-3 > \"$0/first.txt\" && tr a-z b-za < \"$0/first.txt\" > \"$0/second.txt\" && \"$@\" --steps 2 --text \"$0/first.txt\" --save \"$0/run\" > /dev/null && exec \"$@\" --steps 4 --text \"$0/second.txt\" --resume \"$0/run\""
                       ${other_text_dir} $<TARGET_FILE:train_gpt> --in-process 1 --q 1 --layers 1 --hidden 32 --heads 2
                       --seq 16 --batch 4 --every 1 --sample 0)
# An error's line is its message: the source location that raised it only with OPTIMUS_DEBUG set.
add_test(NAME example_train_gpt_error_without_location
         COMMAND bash -c "\"$@\" 2>&1 | grep 'train_gpt: error' | grep -v '[.]cpp:[0-9]*[]]'" bash
                 $<TARGET_FILE:train_gpt> --in-process 4 --heads 3 --hidden 48 --steps 1)
set_tests_properties(example_train_gpt_error_without_location PROPERTIES PASS_REGULAR_EXPRESSION
                     "train_gpt: error: --heads 3 is not divisible by --q 2")
optimus_expect_failure(example_train_gpt_error_location_debug
                       "train_gpt: error: --heads 3 is not divisible by --q 2 .[^]]*gpt_config.cpp:[0-9]+."
                       ${CMAKE_COMMAND} -E env OPTIMUS_DEBUG=1 $<TARGET_FILE:train_gpt> --in-process 4 --heads 3
                       --hidden 48 --steps 1)
function(optimus_stopped_rank_test name rank line)
  optimus_expect_failure(example_train_gpt_stopped_rank_${name} "${line}"
                         ${CMAKE_COMMAND} -E env OPTIMUS_TEST_STOP=${rank}:3 ${ARGN} --timeout 2)
  set_tests_properties(example_train_gpt_stopped_rank_${name} PROPERTIES TIMEOUT 20)
endfunction()
optimus_stopped_rank_test(in_process 1 "train_gpt: error: watchdog: .*world rank 1 has made no communication call for [0-9.]+ s .stopped.. .in-process rank 1 did not stop within 2 s after it and was left running."
                          ${tiny_gpt} --in-process 4)
optimus_stopped_rank_test(sim_in_process 2 "train_gpt: error: watchdog: .*world rank 2 has made no communication call for [0-9.]+ s .stopped.. .in-process rank 2 did not stop"
                          ${tiny_gpt} --in-process 4 --device sim)
# Message-driven pipelines (--execution dynamic): a rank stopped at a step's start leaves the other stage waiting for
# any of its messages (wait_any over the receives posted ahead); the watchdog names the receive and the stopped rank.
function(optimus_stopped_stage_test name fault line)
  optimus_expect_failure(example_train_gpt_stopped_stage_${name} "${line}"
                         ${CMAKE_COMMAND} -E env OPTIMUS_TEST_STOP=${fault} ${ARGN} --timeout 2)
  set_tests_properties(example_train_gpt_stopped_stage_${name} PROPERTIES TIMEOUT 20)
endfunction()
set(dynamic_gpt $<TARGET_FILE:train_gpt> --layers 2 --hidden 32 --heads 2 --seq 16 --steps 20 --every 10 --sample 0
                --batch 8 --pp 2 --micro-batches 4 --execution dynamic)
optimus_stopped_stage_test(dynamic_in_process 4:3:start "train_gpt: error: watchdog: .*world rank 4 has made no communication call for [0-9.]+ s .stopped.."
                           ${dynamic_gpt} --in-process 8 --q 2)
if(OPTIMUS_WITH_MPI)
  optimus_stopped_stage_test(dynamic_np2 1:3:start "train_gpt: error on rank 0: watchdog: recv .message [0-9]+. on the mpi communicator of 2 ranks .*world rank 1( on [^ ]+)? has made no MPI call for [0-9.]+ s .stopped.."
                             ${mpi_launch} 2 ${dynamic_gpt} --q 1)
endif()
if(OPTIMUS_WITH_MPI)
  # Rank 0 stopped: the line named no rank ("the missing rank is on another node") when rank 0 had joined.
  optimus_stopped_rank_test(np2 0 "train_gpt: error on rank 1: watchdog: .*world rank 0( on [^ ]+)? has made no MPI call for [0-9.]+ s .stopped.."
                            ${mpi_launch} 2 ${tiny_gpt} --q 1)
  optimus_stopped_rank_test(np4 2 "train_gpt: error on rank [013]: watchdog: .*world rank 2( on [^ ]+)? has made no MPI call for [0-9.]+ s .stopped.."
                            ${mpi_launch} 4 ${tiny_gpt})
  optimus_stopped_rank_test(sim_np4 3 "train_gpt: error on rank [012]: watchdog: .*world rank 3( on [^ ]+)? has made no MPI call for [0-9.]+ s .stopped.."
                            ${mpi_launch} 4 ${tiny_gpt} --device sim)
endif()

# train_gpt's pipelines, offload and recomputation against the plain run's record, the
# combination matrix, the 1D baseline, and what they refuse.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${tiny_gpt}, ${mpi_launch},
# optimus_same_losses.
# Offloading promises the arithmetic of the run without: every mode prints the plain run's record on the simulated
# device (three blocks, so that blocks wait in host memory; in-process ranks sharing a device and, for one mode, a
# device per process), and the spilled run trains on a device too small for the model's parameters.
set(offload_gpt $<TARGET_FILE:train_gpt> --layers 3 --hidden 32 --heads 2 --seq 16 --steps 20 --every 10 --sample 0
                --batch 4 --device sim)
foreach(mode optimizer spill spill+activations)
  string(REPLACE "+" "_" name ${mode})
  optimus_same_losses(example_train_gpt_offload_${name} "${offload_gpt};--in-process;4"
                      "${offload_gpt};--in-process;4;--offload;${mode}")
endforeach()
optimus_same_losses(example_train_gpt_offload_host_update "${offload_gpt};--in-process;4"
                    "${offload_gpt};--in-process;4;--offload;spill;--offload-update;host")
if(OPTIMUS_WITH_MPI)
  optimus_same_losses(example_train_gpt_offload_mpi "${offload_gpt};--in-process;4"
                      "${mpi_launch};4;${offload_gpt};--offload;spill+activations;--offload-update;device")
endif()
# Eight blocks of h = 128 (6.1 MiB of parameters) on a 7 MiB device: the plain run is refused before it allocates
# (the memory model's bytes), spilled with its activations it trains to the unlimited run's record.
set(big_gpt $<TARGET_FILE:train_gpt> --q 1 --in-process 1 --layers 8 --hidden 128 --heads 4 --seq 16 --batch 4
            --steps 10 --every 5 --sample 0 --device sim)
optimus_expect_failure(example_train_gpt_offload_capacity_none "train_gpt: error: not enough device memory: each rank's device needs [0-9]+ bytes .* and --device-memory gives 7340032 bytes"
                       ${big_gpt} --device-memory 7MiB)
optimus_same_losses(example_train_gpt_offload_capacity "${big_gpt}"
                    "${big_gpt};--device-memory;7MiB;--offload;spill+activations;--offload-update;host")
# Recomputation promises the arithmetic of none: the same record, bit for bit (as printed).
optimus_same_losses(example_train_gpt_recompute "${tiny_gpt8};--in-process;4"
                    "${tiny_gpt8};--in-process;4;--recompute;selective")
set_tests_properties(example_train_gpt_recompute PROPERTIES LABELS "")
# A pipeline promises pp = 1's arithmetic (AdamW's norm included): train_gpt --pp 2 on 2x2 grids prints the record
# of --pp 1 with the same micro-batches, bit for bit as printed, under every schedule (8 in-process ranks; one run
# under mpiexec).
set(pipe_gpt $<TARGET_FILE:train_gpt> --layers 4 --hidden 32 --heads 2 --seq 16 --batch 8 --micro-batches 4
             --steps 10 --every 5 --sample 10)
foreach(schedule gpipe 1f1b interleaved wave zb)
  optimus_same_losses(example_train_gpt_pp2_${schedule} "${pipe_gpt};--in-process;4"
                      "${pipe_gpt};--in-process;8;--pp;2;--schedule;${schedule}" ON)
  set_tests_properties(example_train_gpt_pp2_${schedule} PROPERTIES LABELS "pipeline")
endforeach()
# Recomputation and bf16 GEMMs inside the stages, offloaded moments on simulated stages: the combination matrix below
# (bitwise against --pp 1 in the same math) and test_pipeline.
if(OPTIMUS_WITH_MPI)
  optimus_same_losses(example_train_gpt_pp2_mpi "${pipe_gpt};--in-process;4"
                      "${mpi_launch};8;${pipe_gpt};--pp;2;--schedule;wave" ON)
  set_tests_properties(example_train_gpt_pp2_mpi PROPERTIES LABELS "pipeline;mpi")
endif()
# Checkpoints cross between pipelines and the whole model in the combination matrix (below) and test_checkpoint; what
# a pipeline exports is the bytes --pp 1 exports, llm.c's and Hugging Face's; a pipeline starts from such a file as
# --pp 1 does.
# Stages on simulated devices, one device per process under mpiexec (device communicators, matched by order: the
# channels), print the CPU's record; ranks sharing one device are the combination matrix's.
if(OPTIMUS_WITH_MPI)
  optimus_same_losses(example_train_gpt_pp2_sim_mpi "${pipe_gpt};--in-process;4;--gemm;bf16"
                      "${mpi_launch};8;${pipe_gpt};--pp;2;--schedule;interleaved;--device;sim;--gemm;bf16;--recompute;selective" ON)
  set_tests_properties(example_train_gpt_pp2_sim_mpi PROPERTIES LABELS "pipeline;sim;mpi")
endif()
# A user's run (issue 34's command line): 2 interleaved stages of 2 x 2 grids on simulated devices, bf16 GEMMs,
# selective recomputation, the blocks and their activations spilled to host memory, saving every 5 steps;
# resumed at step 5 on one 2 x 2 grid on the CPU (the same record) and on the 1D baseline's 2 stages of p = 2 (its
# sums in another order: within one unit of the printed fourth decimal).
set(user_run "--in-process;8;--pp;2;--q;2;--schedule;interleaved;--chunks;2;--gemm;bf16;--recompute;selective")
set(user_run "${user_run};--device;sim;--offload;spill+activations")
foreach(case "2d;OFF;--in-process;4;--q;2" "1d;ON;--in-process;4;--layout;1d;--pp;2")
  list(POP_FRONT case name close)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/user_run_${name})
  optimus_resumed_losses(example_train_gpt_user_run_resume_${name} ${dir} ${close}
                         "${pipe_gpt};${user_run};--save;${dir};--save-every;5"
                         "$<TARGET_FILE:train_gpt>;--micro-batches;4;--every;5;--sample;10;--gemm;bf16;${case};--resume;${dir}/step_5")
  set_tests_properties(example_train_gpt_user_run_resume_${name} PROPERTIES LABELS "pipeline;sim" TIMEOUT 180)
endforeach()
# Every feature against every other: an all-pairs covering array over 11 factors, each case trained 3 steps and
# compared with the single-rank CPU run, bitwise where the arithmetic is the same (tests/matrix/combination_matrix.py).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME combination_matrix COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/matrix/combination_matrix.py
                                           $<TARGET_FILE:train_gpt> ${CMAKE_CURRENT_BINARY_DIR}/matrix)
  set_tests_properties(combination_matrix PROPERTIES LABELS "pipeline;sim" TIMEOUT 600
                       ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1"
                       PASS_REGULAR_EXPRESSION "all [0-9]+ cases as expected")
endif()
# The checks and the watchdog change nothing on a healthy pipeline, 2D or 1D.
foreach(case "2d;--in-process;8;--pp;2;--schedule;zb" "1d;--in-process;4;--layout;1d;--pp;2")
  list(POP_FRONT case name)
  optimus_same_losses(example_train_gpt_pp2_checks_${name} "${pipe_gpt};${case}"
                      "${pipe_gpt};${case};--check-finite;--skip-nonfinite;--timeout;120")
  set_tests_properties(example_train_gpt_pp2_checks_${name} PROPERTIES LABELS "pipeline")
endforeach()
# The 1D baseline's pipeline exports the bytes its one stage exports (the same arithmetic), through its groups.
add_test(NAME example_train_gpt_1d_export
         COMMAND ${CMAKE_COMMAND} "-DFIRST_FILE=${CMAKE_CURRENT_BINARY_DIR}/one_d_pp2.bin"
                 "-DSECOND_FILE=${CMAKE_CURRENT_BINARY_DIR}/one_d_pp1.bin"
                 "-DFIRST=${pipe_gpt};--in-process;4;--layout;1d;--pp;2;--export;${CMAKE_CURRENT_BINARY_DIR}/one_d_pp2.bin"
                 "-DSECOND=${pipe_gpt};--in-process;2;--layout;1d;--export;${CMAKE_CURRENT_BINARY_DIR}/one_d_pp1.bin"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/same_exports.cmake)
set_tests_properties(example_train_gpt_1d_export PROPERTIES LABELS "pipeline" TIMEOUT 120)
# The 1D baseline through train_gpt (--layout 1d, p = ranks / pp): its record within f32 rounding of the 2D run's
# with 2 replicas each (pp 1 and 2 without: the combination matrix; what it cannot take: below, with the pipeline's
# refusals).
function(optimus_1d_record name two_d one_d)
  add_test(NAME example_train_gpt_1d_${name}
           COMMAND ${CMAKE_COMMAND} "-DFIRST=${pipe_gpt};${two_d}" "-DSECOND=${pipe_gpt};${one_d}"
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/close_records.cmake)
  set_tests_properties(example_train_gpt_1d_${name} PROPERTIES LABELS "pipeline" TIMEOUT 120)
endfunction()
optimus_1d_record(dp2 "--in-process;4;--q;1;--pp;2" "--in-process;8;--layout;1d;--pp;2;--p;2")  # 2 replicas each
# The 1D baseline on a simulated device per process under mpiexec (its stages' messages on device channels), with
# offloaded moments, prints its CPU record (ranks sharing one device: the combination matrix).
set(one_d_gpt ${pipe_gpt} --layout 1d --pp 2 --schedule interleaved)
if(OPTIMUS_WITH_MPI)
  optimus_same_losses(example_train_gpt_1d_sim_mpi "${one_d_gpt};--in-process;4"
                      "${mpi_launch};4;${one_d_gpt};--device;sim;--offload;optimizer")
  set_tests_properties(example_train_gpt_1d_sim_mpi PROPERTIES LABELS "pipeline;sim;mpi")
endif()
foreach(format safetensors bin)
  set(pipe_export ${CMAKE_CURRENT_BINARY_DIR}/pipeline_export.${format})
  set(whole_export ${CMAKE_CURRENT_BINARY_DIR}/whole_export.${format})
  add_test(NAME example_train_gpt_pp2_export_${format}
           COMMAND ${CMAKE_COMMAND} "-DFIRST_FILE=${pipe_export}" "-DSECOND_FILE=${whole_export}"
                   "-DFIRST=${pipe_gpt};--in-process;8;--pp;2;--schedule;wave;--export;${pipe_export}"
                   "-DSECOND=${pipe_gpt};--in-process;4;--export;${whole_export}"
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/same_exports.cmake)
  set_tests_properties(example_train_gpt_pp2_export_${format} PROPERTIES LABELS "pipeline" TIMEOUT 180
                       FIXTURES_SETUP pipeline_export_${format})
  optimus_same_losses(example_train_gpt_pp2_init_${format} "${pipe_gpt};--in-process;4;--init;${pipe_export}"
                      "${pipe_gpt};--in-process;8;--pp;2;--schedule;1f1b;--init;${pipe_export}" ON)
  set_tests_properties(example_train_gpt_pp2_init_${format} PROPERTIES LABELS "pipeline"
                       FIXTURES_REQUIRED pipeline_export_${format})
endforeach()
# What a pipeline run cannot take: one line on every rank, before any work.
set(pipe_bad $<TARGET_FILE:train_gpt> --hidden 32 --heads 2 --seq 16 --steps 1 --sample 0)
optimus_expect_failure(example_train_gpt_1d_q "train_gpt: error: --q is the 2D grid.s side. --layout 1d takes --p"
                       ${pipe_bad} --in-process 2 --layout 1d --q 2)
optimus_expect_failure(example_train_gpt_1d_p_without "train_gpt: error: --p is the 1D baseline's group size"
                       ${pipe_bad} --in-process 2 --p 2)
optimus_expect_failure(example_train_gpt_1d_bad_world
                       "train_gpt: error: --layout 1d: 6 ranks are not dp x pp x p for pp = 2 and p = 2"
                       ${pipe_bad} --in-process 6 --layout 1d --p 2 --pp 2 --layers 2)
optimus_expect_failure(example_train_gpt_pp_bad_layers
                       "train_gpt: error: pipeline: 3 layers do not divide among 2 stages x 2 chunks"
                       ${pipe_bad} --q 1 --in-process 2 --pp 2 --schedule wave --layers 3)
optimus_expect_failure(example_train_gpt_pp_bad_m
                       "train_gpt: error: pipeline schedule interleaved: 1 micro-batches is not a multiple of the 2 stages"
                       ${pipe_bad} --q 1 --in-process 2 --pp 2 --schedule interleaved --layers 4 --micro-batches 1)
optimus_expect_failure(example_train_gpt_pp_bad_world
                       "train_gpt: error: 3 ranks are not dp x pp x q.2 for pp = 2 and q = 1"
                       ${pipe_bad} --q 1 --in-process 3 --pp 2)
optimus_expect_failure(example_train_gpt_pp_bad_batch
                       "train_gpt: error: --batch 4 in 4 micro-batches of whole sequences divisible by q = 2"
                       ${pipe_bad} --in-process 8 --q 2 --pp 2 --batch 4 --micro-batches 4)
optimus_expect_failure(example_train_gpt_pp_bad_chunks
                       "train_gpt: error: pipeline schedule zb has one chunk per stage, not 2"
                       ${pipe_bad} --q 1 --in-process 2 --pp 2 --schedule zb --chunks 2)
optimus_expect_failure(example_train_gpt_schedule_without_pp "train_gpt: error: --schedule and --chunks need --pp > 1"
                       ${pipe_bad} --q 1 --in-process 1 --schedule zb)
# What offloading cannot take: the CPU (everything is host memory there), an update way without offload.
optimus_expect_failure(example_train_gpt_offload_cpu
                       "train_gpt: error: --offload spill moves state between a device and the host: it needs --device"
                       ${pipe_bad} --q 1 --in-process 1 --offload spill)
optimus_expect_failure(example_train_gpt_offload_update_alone
                       "train_gpt: error: --offload-update needs --offload optimizer, spill or spill"
                       ${pipe_bad} --q 1 --in-process 1 --device sim --offload-update host)
optimus_expect_failure(example_train_gpt_offload_bad_mode
                       "train_gpt: error: option --offload: 'blocks' is not one of none, optimizer, spill"
                       ${pipe_bad} --q 1 --in-process 1 --device sim --offload blocks)

# optimus-bench at tiny sizes: every benchmark's smoke run, its exact figures and refusals.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${mpi_launch}.
# The scaling benchmark at tiny sizes: it exits non-zero unless the measured bytes and activation bytes per
# rank equal their formulas and the blocks match the reference.
if(OPTIMUS_WITH_MPI AND OPTIMUS_BUILD_BENCH)
  foreach(layout 1d 2d)
    foreach(np 4 16)
      add_test(NAME bench_scaling_${layout}_np${np}
               COMMAND ${mpi_launch} ${np} $<TARGET_FILE:optimus-bench> scaling --layout ${layout} --b 8 --s 8
                       --h 32 --heads 16 --layers 2 --iters 1 --warmup 0 --check on --dtype f64)
      set(labels mpi bench)
      if(np GREATER 9)
        list(APPEND labels long)
      endif()
      set_tests_properties(bench_scaling_${layout}_np${np} PROPERTIES LABELS "${labels}" TIMEOUT 120)
    endforeach()
    # Mixed precision: SUMMA panels in bf16, activations saved in bf16, against their own formulas.
    add_test(NAME bench_scaling_${layout}_bf16_np4
             COMMAND ${mpi_launch} 4 $<TARGET_FILE:optimus-bench> scaling --layout ${layout} --b 8 --s 8 --h 32
                     --heads 16 --layers 2 --iters 1 --warmup 0 --check on --gemm bf16)
    set_tests_properties(bench_scaling_${layout}_bf16_np4 PROPERTIES LABELS "mpi;bench" TIMEOUT 120)
    # Llama's blocks (GQA's narrower c_attn, SwiGLU's wider c_fc, no biases, RMSNorm's one forward all-reduce): bytes
    # and activations against the same formulas, the blocks against the reference.
    add_test(NAME bench_scaling_${layout}_llama_np4
             COMMAND ${mpi_launch} 4 $<TARGET_FILE:optimus-bench> scaling --layout ${layout} --arch llama --b 8 --s 8
                     --h 32 --heads 8 --kv-heads 4 --layers 2 --iters 1 --warmup 0 --check on --dtype f64)
    set_tests_properties(bench_scaling_${layout}_llama_np4 PROPERTIES LABELS "mpi;bench" TIMEOUT 120)
    # BERT's blocks (post-norm, exact GELU, bidirectional): the same bytes and activations, against the reference.
    add_test(NAME bench_scaling_${layout}_bert_np4
             COMMAND ${mpi_launch} 4 $<TARGET_FILE:optimus-bench> scaling --layout ${layout} --arch bert --b 8 --s 8
                     --h 32 --heads 8 --layers 2 --iters 1 --warmup 0 --check on --dtype f64)
    set_tests_properties(bench_scaling_${layout}_bert_np4 PROPERTIES LABELS "mpi;bench" TIMEOUT 120
                         PASS_REGULAR_EXPRESSION "bytes equal prediction: yes; activation bytes equal prediction: yes")
  endforeach()
  add_test(NAME bench_calibrate COMMAND ${mpi_launch} 2 $<TARGET_FILE:optimus-bench> calibrate --iters 2)
  set_tests_properties(bench_calibrate PROPERTIES LABELS "mpi;bench" PASS_REGULAR_EXPRESSION "gemm_gflops_per_rank")
  # Every OpenBLAS kernel this processor runs, switched to in one process and checked, the loaded one in use again.
  add_test(NAME bench_blas COMMAND optimus-bench blas --n 96 --threads 1,2 --sweeps 1)
  set_tests_properties(bench_blas PROPERTIES LABELS bench ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1"
                       PASS_REGULAR_EXPRESSION "\n +[A-Za-z]+ +[A-Z0-9-]+ +\\* +1 +96 .*every kernel computed the check products right"
                       FAIL_REGULAR_EXPRESSION " 1\n")
  # The fused attention alone: on the simulated device each row equals the CPU's; sequences across tiles of 64.
  add_test(NAME bench_attention_sim COMMAND optimus-bench attention --device sim --b 1 --s 70,130 --heads 2 --d 8
                                            --dropout 0.1 --warmup 0 --iters 1)
  set_tests_properties(bench_attention_sim PROPERTIES LABELS "bench;sim" PASS_REGULAR_EXPRESSION
                       "\n +sim +1 +130 .* 0\n.*every checked row equals the CPU's")
  add_test(NAME bench_layer_cpu COMMAND optimus-bench layer --q 1,2 --b 2 --s 8 --h 16 --heads 2)
  set_tests_properties(bench_layer_cpu PROPERTIES LABELS bench PASS_REGULAR_EXPRESSION "all rows checked")
  add_test(NAME bench_layer_bert COMMAND optimus-bench layer --arch bert --q 1,2 --b 2 --s 8 --h 16 --heads 2)
  set_tests_properties(bench_layer_bert PROPERTIES LABELS bench PASS_REGULAR_EXPRESSION "all rows checked")
  # With dropout: the blocks' masks and the reference's agree (training step 1's masks).
  add_test(NAME bench_layer_dropout COMMAND optimus-bench layer --q 1,2 --b 2 --s 8 --h 16 --heads 2 --dropout 0.25)
  set_tests_properties(bench_layer_dropout PROPERTIES LABELS bench PASS_REGULAR_EXPRESSION
                       "dropout 0.25.*all rows checked")
  # --check off says so (it used to print "all rows checked").
  add_test(NAME bench_layer_unchecked COMMAND optimus-bench layer --q 1 --b 2 --s 8 --h 16 --heads 2 --check off)
  set_tests_properties(bench_layer_unchecked PROPERTIES LABELS bench PASS_REGULAR_EXPRESSION
                       "rows NOT checked against the reference" FAIL_REGULAR_EXPRESSION "all rows checked")
  # The GPT bench in f32 and with bf16 GEMM operands (a row each), both against the reference.
  add_test(NAME bench_gpt_cpu COMMAND optimus-bench gpt --q 1,2 --b 2 --s 8 --h 16 --heads 2 --vocab 32
                                      --gemm f32,bf16)
  set_tests_properties(bench_gpt_cpu PROPERTIES LABELS bench
                       PASS_REGULAR_EXPRESSION " f32 .* bf16 .*all rows checked")
  # Saved activations per block and policy: the formula against the tracker, beside Korthikanti's figures.
  add_test(NAME bench_activations COMMAND optimus-bench activations --h 64 --s 32 --heads 4 --layers 2 --q 1,2
                                          --budget-gib 0.01)
  set_tests_properties(bench_activations PROPERTIES LABELS bench
                       PASS_REGULAR_EXPRESSION "bf16 +full .*checked: formula equals the tracker")
  # The same on the simulated device: checked, allocation-free steps.
  add_test(NAME bench_layer_sim COMMAND optimus-bench layer --device sim --q 1,2 --b 2 --s 8 --h 16 --heads 2)
  # Llama's blocks on the simulated device: the same columns, checked against the reference.
  add_test(NAME bench_layer_llama_sim COMMAND optimus-bench layer --device sim --arch llama --q 1,2 --b 2 --s 8 --h 32
                                              --heads 4 --kv-heads 2)
  set_tests_properties(bench_layer_llama_sim PROPERTIES LABELS "sim;bench" PASS_REGULAR_EXPRESSION
                       "sim +2 +2 +8 +32 +4 +128 .*all rows checked")
  set_tests_properties(bench_layer_sim PROPERTIES LABELS "sim;bench" PASS_REGULAR_EXPRESSION "all rows checked")
  add_test(NAME bench_gpt_sim COMMAND optimus-bench gpt --device sim --q 1,2 --b 2 --s 8 --h 16 --heads 2 --vocab 32
                                      --gemm f32,bf16)
  set_tests_properties(bench_gpt_sim PROPERTIES LABELS "sim;bench"
                       PASS_REGULAR_EXPRESSION " f32 .* bf16 .*all rows checked")
  # Every offload mode on the simulated device at q = 1 and 2, its copies throttled, a bandwidth sweep, the largest GPT
  # per mode in 2.5 MiB and the timelines: every row's device bytes and copies equal the formulas (the program exits 1
  # otherwise).
  add_test(NAME bench_offload_sim COMMAND optimus-bench offload --device sim --device-bandwidth 2 --q 1,2 --b 2 --s 16
                                          --h 32 --heads 2 --layers 3 --vocab 64 --warmup 1 --iters 1 --sweep 1,0.1
                                          --device-memory 2560KiB --largest on --max-layers 8
                                          --trace ${CMAKE_CURRENT_BINARY_DIR}/offload_trace)
  set_tests_properties(bench_offload_sim PROPERTIES LABELS "sim;bench" TIMEOUT 240 PASS_REGULAR_EXPRESSION
                       "spill\\+activations .*largest GPT.*none: [0-9]+ blocks.*every row's device bytes and copies equal")
  # The planner checked against runs at a tiny size: every plan's memory by kind equals the trackers' on every rank
  # (the program exits 1 otherwise), with the rank correlation and the pick's distance from the fastest printed.
  add_test(NAME bench_plan COMMAND optimus-bench plan --in-process 4 --cores 2 --h 32 --heads 2 --layers 2 --s 16
                                   --batch 8 --vocab 64 --max-micro-batches 2 --limit 6 --warmup 0 --iters 1 --rounds 2)
  set_tests_properties(bench_plan PROPERTIES LABELS bench TIMEOUT 240 ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1"
                       PASS_REGULAR_EXPRESSION "us per collective call and participant, measured with 4 ranks on 2 cores.*Spearman rank correlation .* over 6 plans.*between rounds, mean over 1 pairs of 2 rounds.*memory: 0 ranks x kinds off")
  optimus_expect_failure(bench_plan_mpi_uncalibrated "optimus-bench: error: plan under mpiexec needs --calibration"
                         ${mpi_launch} 2 $<TARGET_FILE:optimus-bench> plan)
  optimus_expect_failure(bench_offload_cpu "optimus-bench: error: offload moves state between a device and the host"
                         $<TARGET_FILE:optimus-bench> offload)
  optimus_expect_failure(bench_offload_largest_unlimited
                         "optimus-bench: error: --largest on searches within the simulated device's capacity"
                         $<TARGET_FILE:optimus-bench> offload --device sim --largest on)
  optimus_expect_failure(bench_offload_memory_unused
                         "optimus-bench: error: --device-memory is the capacity --largest on searches within"
                         $<TARGET_FILE:optimus-bench> offload --device sim --device-memory 64MiB)
  # A budget the parameters alone exceed: the largest batch is 0, not a negative number.
  add_test(NAME bench_scaling_tiny_budget
           COMMAND ${mpi_launch} 4 $<TARGET_FILE:optimus-bench> scaling --layout 2d --b 8 --s 8 --h 32 --heads 16
                   --layers 2 --iters 1 --warmup 0 --budget-gib 1e-12)
  set_tests_properties(bench_scaling_tiny_budget PROPERTIES LABELS "mpi;bench" TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "budget 0 GiB per rank" FAIL_REGULAR_EXPRESSION " -[0-9]")
  # The model's calibration is read as optimus-plan reads it: a negative or zero rate is refused.
  foreach(case "negative;-5;is not a finite, non-negative number" "zero;0;GEMM 0 GFLOP/s")
    list(POP_FRONT case name gflops message)
    set(file ${CMAKE_CURRENT_BINARY_DIR}/calibration_${name}.json)
    file(WRITE ${file} "{\"ranks\": 4, \"broadcast_alpha_s\": 1e-6, \"broadcast_beta_s_per_byte\": 1e-10, "
                       "\"allreduce_alpha_s\": 1e-6, \"allreduce_beta_s_per_byte\": 1e-10, "
                       "\"gemm_gflops_per_rank\": ${gflops}, \"gelu_elements_per_s\": 1e9, "
                       "\"axpby_elements_per_s\": 1e9, \"adamw_parameters_per_s\": 1e8}\n")
    optimus_expect_failure(bench_model_calibration_${name} "optimus-bench: error: calibration.*${message}"
                           $<TARGET_FILE:optimus-bench> model --calibration ${file})
  endforeach()
  if(OPTIMUS_HAVE_CUDA)
    # The same blocks on one GPU (q = 1 and in-process q = 2) against the reference, allocation-free steps.
    add_test(NAME bench_layer_cuda COMMAND optimus-bench layer --device cuda --q 1,2 --b 2 --s 8 --h 16 --heads 2
                                           --peak-n 1024)
    set_tests_properties(bench_layer_cuda PROPERTIES LABELS "gpu;bench" PASS_REGULAR_EXPRESSION "all rows checked"
                         SKIP_REGULAR_EXPRESSION "CUDA device 0 does not exist")
    add_test(NAME bench_gpt_cuda COMMAND optimus-bench gpt --device cuda --q 1,2 --b 2 --s 8 --h 16 --heads 2
                                         --vocab 32 --gemm bf16 --peak-n 1024)
    set_tests_properties(bench_gpt_cuda PROPERTIES LABELS "gpu;bench" PASS_REGULAR_EXPRESSION "all rows checked"
                         SKIP_REGULAR_EXPRESSION "CUDA device 0 does not exist")
  endif()
  # Checkpoint throughput beside a plain file, at a tiny size (the real shape, GPT-2 124M, by hand: bench/README.md).
  set(tiny_checkpoint_bench $<TARGET_FILE:optimus-bench> checkpoint --h 32 --layers 1 --heads 2 --vocab 64 --seq 16
                            --iters 1)
  add_test(NAME bench_checkpoint COMMAND ${mpi_launch} 4 ${tiny_checkpoint_bench}
                                         --dir ${CMAKE_CURRENT_BINARY_DIR}/checkpoint-bench)
  set_tests_properties(bench_checkpoint PROPERTIES LABELS "mpi;bench" TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "write .*\n *read ")
  # --dir is a path, never a command (it went to a shell: "x;touch PWNED;#" ran touch), and the directory is left as
  # found; a training run's save directory is refused (the bench wrote a step_0 there, which the run then refused).
  set(bench_dir ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_bench_dir)
  add_test(NAME bench_checkpoint_dir_not_a_command
           COMMAND bash -c "rm -rf \"$0\" && mkdir -p \"$0\" && cd \"$0\" && \"$@\" --dir \"$0/x;touch PWNED;#\" && \
[[ ! -e \"$0/PWNED\" && -z $(ls -A \"$0\") ]] && echo 'no command run, nothing left'" ${bench_dir}
                   ${tiny_checkpoint_bench})
  set_tests_properties(bench_checkpoint_dir_not_a_command PROPERTIES LABELS bench TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "write .*read .*no command run, nothing left")
  optimus_expect_failure(bench_checkpoint_save_dir_refused
                         "optimus-bench: error: save directory .*bench_save_dir holds another run's checkpoints"
                         bash -c "rm -rf \"$1\" && \"$0\" --in-process 1 --q 1 --layers 1 --hidden 32 --heads 2 --seq 16 \
--batch 4 --steps 2 --sample 0 --save \"$1\" > /dev/null && exec \"\${@:2}\" --dir \"$1\""
                         $<TARGET_FILE:train_gpt> ${CMAKE_CURRENT_BINARY_DIR}/bench_save_dir ${tiny_checkpoint_bench})
  add_test(NAME bench_model COMMAND optimus-bench model --ps 4,16,64)
  set_tests_properties(bench_model PROPERTIES LABELS bench PASS_REGULAR_EXPRESSION "speedup_2D")
  # The alpha-beta model's isoefficiency (docs/isoefficiency.md): the batch each layout needs for E = 0.5, its bound,
  # and the fitted exponent (on the H100 preset's large block 2D reaches E at p = 4, 16 and 64, 1D at 4 and 16: 1D has
  # no batch at 64, both have an exponent).
  add_test(NAME bench_model_iso COMMAND optimus-bench model --ps 4,16,64,256 --iso 0.5)
  set_tests_properties(bench_model_iso PROPERTIES LABELS bench PASS_REGULAR_EXPRESSION
                       "1D_iso_b +2D_iso_b +1D_E_max +2D_E_max.*\n +64 +8 [^\n]* - +[0-9]+ +[0-9.]+ +[0-9.]+\n.*isoefficiency exponent [^\n]*1D [0-9]+[.][0-9]+[^\n]*2D [0-9]+[.][0-9]+")
  # The Optimus paper's 64-GPU claims through the models on the Frontera RTX preset (docs/paper_claims.md): every row
  # of these shapes fits both layouts and has every ratio (h 8192 on 16-rank groups fits neither in 15 GiB).
  # (CMake's regular expressions have no {n} and at most 9 groups: the row's pattern is repeated.)
  string(REPEAT " +[0-9][0-9.]*" 18 paper_row)
  string(REPEAT "${paper_row}\n" 8 paper_rows)
  add_test(NAME bench_paper COMMAND optimus-bench paper --tp 16,64 --h 2048,4096)
  set_tests_properties(bench_paper PROPERTIES LABELS bench PASS_REGULAR_EXPRESSION "dist_x\n${paper_rows}# the paper")
  # The same with the paper's own model, BERT's blocks (the memory model holds its token types, embedding norm and
  # masked-LM head).
  add_test(NAME bench_paper_bert COMMAND optimus-bench paper --tp 16,64 --h 2048,4096 --arch bert)
  set_tests_properties(bench_paper_bert PROPERTIES LABELS bench PASS_REGULAR_EXPRESSION
                       "blocks: 24 of BERT's, the paper's own model.*dist_x\n${paper_rows}# the paper")
  if(OPTIMUS_WITH_MPI)
    # bench/scaling.sh end to end on a tiny shape at p = 1 and 4 (ranks sharing 2 cores: nothing timed is read), its
    # report and the model's exponents included.
    add_test(NAME bench_scaling_smoke
             COMMAND ${CMAKE_SOURCE_DIR}/bench/scaling.sh --smoke --ps "1 4" --modes "strong weak iso" --tiny64 off
                     --out ${CMAKE_CURRENT_BINARY_DIR}/scaling-smoke)
    set_tests_properties(bench_scaling_smoke PROPERTIES LABELS "mpi;bench" TIMEOUT 300
                         ENVIRONMENT "OPTIMUS_BUILD_DIR=${PROJECT_BINARY_DIR}" PASS_REGULAR_EXPRESSION
                         "bytes equal prediction in every row: True.*isoefficiency exponent [(]b ~ p.x, p > 1[)]: 1d")
  endif()
endif()

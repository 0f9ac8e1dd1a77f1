# The programs under mpiexec: summa_2x2, the benchmarks' smoke runs, and bad inputs each
# ending in one line.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${mpi_launch}.
if(OPTIMUS_BUILD_EXAMPLES)
  add_test(NAME example_summa_2x2 COMMAND ${mpi_launch} 4 $<TARGET_FILE:summa_2x2>)
  set_tests_properties(example_summa_2x2 PROPERTIES LABELS mpi PASS_REGULAR_EXPRESSION "-> verified" TIMEOUT 60)
  optimus_expect_failure(example_bad_world "summa_2x2: error: Grid::create: world size 3 is not dp\\*q\\*q for q = 2"
                         ${mpi_launch} 3 $<TARGET_FILE:summa_2x2>)
  optimus_expect_failure(example_bad_shape "summa_2x2: error: DistMatrix: rows = 385 is not divisible by q = 2"
                         ${mpi_launch} 4 $<TARGET_FILE:summa_2x2> --m 385)
  optimus_expect_failure(example_bad_value "summa_2x2: error: option --q needs an integer, got 'two'"
                         ${mpi_launch} 4 $<TARGET_FILE:summa_2x2> --q two)
  # --help prints the accepted options and exits 0 (one process is enough).
  add_test(NAME example_help COMMAND $<TARGET_FILE:summa_2x2> --help)
  set_tests_properties(example_help PROPERTIES LABELS errors
                       PASS_REGULAR_EXPRESSION "options:.*--m  \\(integer in \\[1, 1048576\\]\\)  rows of A.*--q  ")
endif()
if(OPTIMUS_BUILD_BENCH)
  add_test(NAME bench_summa_smoke COMMAND ${mpi_launch} 4 $<TARGET_FILE:optimus-bench> summa --n 64 --k 32
                                          --dtype f64,f32 --iters 1 --json ${CMAKE_CURRENT_BINARY_DIR}/summa.json)
  set_tests_properties(bench_summa_smoke PROPERTIES LABELS "mpi;bench" PASS_REGULAR_EXPRESSION
                       "Out of bounds values : 0 OK" TIMEOUT 120)
  optimus_expect_failure(bench_bad_shape "optimus-bench: error: DistMatrix: rows = 65 is not divisible by q = 3"
                         ${mpi_launch} 9 $<TARGET_FILE:optimus-bench> summa --n 65)
  optimus_expect_failure(bench_bad_world "optimus-bench: error: .*world size 8 is not a square"
                         ${mpi_launch} 8 $<TARGET_FILE:optimus-bench> summa)
  # Every schedule on 2 stages, each in both execution orders with injected delays: activation and p2p bytes as
  # predicted (#wrong 0; the program exits 1 otherwise), the orders compared, the trace written.
  set(pipeline_shape --s 16 --h 32 --heads 2 --vocab 64 --warmup 0 --iters 1)
  add_test(NAME bench_pipeline_smoke
           COMMAND ${mpi_launch} 2 $<TARGET_FILE:optimus-bench> pipeline --pp 2 --m 4 ${pipeline_shape} --jitter 0.3
                   --trace ${CMAKE_CURRENT_BINARY_DIR}/pipeline_trace.json)
  set_tests_properties(bench_pipeline_smoke PROPERTIES LABELS "mpi;bench" TIMEOUT 120 PASS_REGULAR_EXPRESSION
                       "zb +dynamic +1 .*#wrong: 0.*zb: step time dynamic / static.*simulator alone.*zb +S=2")
  # The sweep's schedulers measured on 2 in-process slots beside the simulator, and simulated on 2 and 4.
  add_test(NAME bench_sweep_smoke
           COMMAND optimus-bench sweep --members 3 --slots 2 --simulate 2,4 --m 2 --steps 2 --b 2 --s 8 --h 16
                   --heads 2 --layers 2 --vocab 32)
  set_tests_properties(bench_sweep_smoke PROPERTIES LABELS bench TIMEOUT 120 PASS_REGULAR_EXPRESSION
                       "4 +pipeline +stage +simulated")
  # The same on one simulated device the slots share, the members' blocks spilled through throttled copies.
  add_test(NAME bench_sweep_sim_spill_smoke
           COMMAND optimus-bench sweep --members 3 --slots 2 --simulate 2 --m 2 --steps 2 --b 2 --s 8 --h 16
                   --heads 2 --layers 2 --vocab 32 --device sim --device-bandwidth 1 --offload spill --in-flight 2)
  set_tests_properties(bench_sweep_sim_spill_smoke PROPERTIES LABELS "bench;sim" TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "on sim .offload spill.*2 +pipeline +stage +simulated")
  # The 1D baseline's pipeline on 2 stages of 2 ranks: p2p bytes exactly as predicted (the whole replicated block).
  add_test(NAME bench_pipeline_1d_smoke
           COMMAND ${mpi_launch} 4 $<TARGET_FILE:optimus-bench> pipeline --layout 1d --pp 2 --m 4 ${pipeline_shape})
  set_tests_properties(bench_pipeline_1d_smoke PROPERTIES LABELS "mpi;bench" TIMEOUT 120 PASS_REGULAR_EXPRESSION
                       "pp 2 x p 2 \\(1D stages\\).*zb +dynamic +1 .*#wrong: 0")
  optimus_expect_failure(bench_pipeline_1d_bad_q "optimus-bench: error: pipeline: --q is the 2D grid's side"
                         ${mpi_launch} 2 $<TARGET_FILE:optimus-bench> pipeline --layout 1d --q 2 ${pipeline_shape})
  optimus_expect_failure(bench_pipeline_one_stage "optimus-bench: error: pipeline: --pp 1 is no pipeline"
                         ${mpi_launch} 1 $<TARGET_FILE:optimus-bench> pipeline --pp 1 ${pipeline_shape})
  optimus_expect_failure(bench_pipeline_1d_bad_world
                         "optimus-bench: error: pipeline: world size 3 is not pp x p for pp = 2"
                         ${mpi_launch} 3 $<TARGET_FILE:optimus-bench> pipeline --layout 1d ${pipeline_shape})
  # Bad input, each one line on every rank: layers that do not divide, too few micro-batches for interleaving, a
  # world that is not dp x pp x q x q.
  optimus_expect_failure(bench_pipeline_bad_layers
                         "optimus-bench: error: pipeline: 3 layers do not divide among 2 stages x 1 chunks"
                         ${mpi_launch} 2 $<TARGET_FILE:optimus-bench> pipeline --layers 3 ${pipeline_shape})
  optimus_expect_failure(bench_pipeline_bad_m
                         "optimus-bench: error: pipeline schedule interleaved: 1 micro-batches is not a multiple of the 2 stages"
                         ${mpi_launch} 2 $<TARGET_FILE:optimus-bench> pipeline --schedules interleaved --m 1
                         ${pipeline_shape})
  optimus_expect_failure(bench_pipeline_bad_world
                         "optimus-bench: error: Grid::create: world size 3 is not dp.pp.q.q for q = 1 and pp = 2"
                         ${mpi_launch} 3 $<TARGET_FILE:optimus-bench> pipeline ${pipeline_shape})
endif()
# The inputs that crashed, overflowed or printed nonsense before option tables (the hardening issue): each now ends
# with one line naming the option and the value, before any work (one process each).
# (Each with the program built: the sanitizer pass builds the programs, not the benches.)
if(OPTIMUS_BUILD_PROGRAMS OR OPTIMUS_BUILD_BENCH)
  set(bad_inputs
      "train_gpt --every 0|option --every: 0 is out of range .1, 100000000."
      "train_gpt --every -1|option --every: -1 is out of range"
      "train_gpt --steps 0|option --steps: 0 is out of range"
      "train_gpt --steps 4294967297|option --steps: 4294967297 is out of range"
      "train_gpt --q 4294967297|option --q: 4294967297 is out of range .1, 64."
      "train_gpt --lr inf|option --lr needs a finite number, got 'inf'"
      "train_gpt --lr nan|option --lr needs a finite number, got 'nan'"
      "train_gpt --lr -1|option --lr: -1 is out of range .0, 10."
      "train_gpt --hidden 0|option --hidden: 0 is out of range"
      "train_gpt --seq -1|option --seq: -1 is out of range"
      "train_gpt --batch 1e8|option --batch needs an integer, got '1e8'"
      "train_gpt --batch 100000000|option --batch: 100000000 is out of range"
      "train_gpt --in-process 4 --seq 4000|the held-out tokens .3515. are fewer than one sequence of 4000 plus its target"
      "optimus-bench layer --iters 0|option --iters: 0 is out of range"
      "optimus-bench gpt --iters 0|option --iters: 0 is out of range"
      "optimus-bench scaling --iters 0|option --iters: 0 is out of range"
      "optimus-bench calibrate --iters 0|option --iters: 0 is out of range"
      "optimus-bench layer --heads 0|option --heads: 0 is out of range"
      "optimus-bench gpt --vocab 0|option --vocab: 0 is out of range"
      "optimus-bench model --ps 0|option --ps: 0 is out of range"
      "optimus-bench model --tflops 0|option --tflops: 0 is out of range .0, 1e.06."
      "optimus-bench model --tflops nan|option --tflops needs a finite number, got 'nan'"
      "optimus-bench model --h -8192|option --h: -8192 is out of range"
      "optimus-bench scaling --budget-gib -1|option --budget-gib: -1 is out of range"
      "optimus-bench scaling --budget-gib nan|option --budget-gib needs a finite number, got 'nan'"
      "optimus-bench calibrate --json /nonexistent/x|option --json: the directory '/nonexistent' of '/nonexistent/x' does not exist"
      "optimus-bench summa --m 0|option --m: 0 is out of range")
  set(k 0)
  foreach(entry IN LISTS bad_inputs)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 command_line)
    list(GET parts 1 line)
    separate_arguments(args UNIX_COMMAND "${command_line}")
    list(POP_FRONT args program)
    math(EXPR k "${k} + 1")
    if(NOT TARGET ${program})
      continue()
    endif()
    optimus_expect_failure(bad_input_${k} "${program}: error: ${line}" $<TARGET_FILE:${program}> ${args})
  endforeach()
endif()

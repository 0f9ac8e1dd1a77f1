# train_gpt's inputs and outputs: the header, inputs that are not files, sizes no host holds,
# save directories and outputs raced, written whole or not at all, a simulated device's record.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${tiny_gpt}, ${mpi_launch},
# optimus_same_losses.
# The header names the processor and the CPU GEMM's kernel (optimus/core/blas_kernel.hpp): by default one that is
# not older than the processor (OpenBLAS's own choice or Optimus's replacement); a kernel the user chose stands,
# judged — OpenBLAS's SSE kernel is older than any x86-64 processor with AVX.
if(OPTIMUS_GEMM_BACKEND STREQUAL "openblas" AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(one_step_gpt $<TARGET_FILE:train_gpt> --q 1 --in-process 1 --layers 1 --hidden 32 --heads 2 --seq 16 --batch 4
                   --steps 1 --every 1 --sample 0)
  add_test(NAME example_train_gpt_kernel COMMAND ${one_step_gpt})
  set_tests_properties(example_train_gpt_kernel PROPERTIES TIMEOUT 60
                       ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1"
                       ENVIRONMENT_MODIFICATION "OPENBLAS_CORETYPE=unset:"
                       PASS_REGULAR_EXPRESSION "\n  processor: [^\n]+family 0x[0-9a-f]+ model[^\n]+\n  GEMM: OpenBLAS [0-9.]+, kernel"
                       FAIL_REGULAR_EXPRESSION "OLDER than this processor")
  add_test(NAME example_train_gpt_user_kernel COMMAND ${one_step_gpt})
  set_tests_properties(example_train_gpt_user_kernel PROPERTIES TIMEOUT 60
                       ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;OPENBLAS_CORETYPE=Prescott"
                       PASS_REGULAR_EXPRESSION
                       "GEMM: OpenBLAS [0-9.]+, kernel Prescott \\(SSE\\), OPENBLAS_CORETYPE=Prescott \\(set by the user\\), unset it for Optimus's choice, [A-Za-z]+; OLDER than this processor")
endif()
# Nothing lost, nothing silent (issue 35). Inputs that are not regular files (a FIFO would block the open forever), a
# text with nothing to predict, a bandwidth in range whose copies would overflow the clock, a resumed run given
# another dropout, a save directory whose name has a comma.
optimus_expect_failure(example_train_gpt_text_directory
                       "train_gpt: error: option --text: '/tmp' is a directory, not a file to read" ${tiny_gpt} --text /tmp)
optimus_expect_failure(example_train_gpt_text_fifo
                       "train_gpt: error: option --text: 'text.fifo' is a FIFO, not a file to read"
                       sh -c "rm -f text.fifo && mkfifo text.fifo && exec \"$@\" --text text.fifo" sh ${tiny_gpt})
optimus_expect_failure(example_train_gpt_text_one_character
                       "train_gpt: error: the text 'zeros.txt' is one character repeated .byte 0, 2000 times."
                       sh -c "head -c 2000 /dev/zero > zeros.txt && exec \"$@\" --text zeros.txt" sh ${tiny_gpt})
optimus_expect_failure(example_train_gpt_bandwidth_tiny
                       "train_gpt: error: option --device-bandwidth: 1e-300 is out of range"
                       ${tiny_gpt} --device sim --device-bandwidth 1e-300)
optimus_expect_failure(example_train_gpt_resume_other_dropout
                       "train_gpt: error: --dropout 0.2 differs from the checkpoint's 0.1 .a resumed run keeps its dropout."
                       sh -c "rm -rf dropout_run && \"$@\" --save dropout_run && exec \"$@\" --resume dropout_run --dropout 0.2"
                       sh ${tiny_gpt} --in-process 1 --q 1)
set(comma_dir ${CMAKE_CURRENT_BINARY_DIR}/sa,ve)
optimus_resumed_losses(example_train_gpt_resume_comma ${comma_dir} OFF
                       "${tiny_gpt};--in-process;4;--save;${comma_dir};--save-every;10"
                       "$<TARGET_FILE:train_gpt>;--every;10;--sample;0;--in-process;4;--resume;${comma_dir}/step_10")
set_tests_properties(example_train_gpt_resume_comma PROPERTIES TIMEOUT 120)
optimus_release_only(example_train_gpt_resume_comma)  # test_checkpoint's paths, under the sanitizers
# Sizes in range that no host holds: one line naming the bytes, at once (it was the kernel's OOM killer, minutes
# later): 2 blocks of ffn 4194304 (69 G parameters), and a batch of a million sequences of 1024 tokens.
optimus_expect_failure(example_train_gpt_too_large_ffn
                       "train_gpt: error: not enough memory: the rank on this host needs about [0-9.]+ GiB"
                       $<TARGET_FILE:train_gpt> --in-process 1 --q 1 --layers 2 --hidden 4096 --heads 32 --ffn 4194304
                       --seq 16 --batch 1 --steps 1)
optimus_expect_failure(example_train_gpt_too_large_batch
                       "train_gpt: error: not enough memory: the 4 ranks on this host need about [0-9.]+ GiB"
                       $<TARGET_FILE:train_gpt> --in-process 4 --layers 1 --hidden 32 --heads 2 --seq 1024
                       --batch 1048576 --steps 1)
# Runs fighting over one save directory: racing, rolling back, --keep across branches, killed while saving.
add_test(NAME save_dir_torture COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/save_dir_torture.sh
                                       $<TARGET_FILE:train_gpt> ${CMAKE_CURRENT_BINARY_DIR}/save_dir_torture)
set_tests_properties(save_dir_torture PROPERTIES TIMEOUT 300 PASS_REGULAR_EXPRESSION "save_dir_torture: passed"
                     ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
optimus_release_only(save_dir_torture)  # test_checkpoint's SaveDirectory cases, under the sanitizers
# Two runs writing one output at once — exports, a Llama directory, optimus-plan's JSON — five races each: the output
# is wholly one run's (its solo output's bytes) or one run refuses with one line (tests/checkpoint/concurrent_outputs.sh).
add_test(NAME concurrent_outputs COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint/concurrent_outputs.sh
                                         $<TARGET_FILE:train_gpt> $<TARGET_FILE:optimus-plan>
                                         ${CMAKE_CURRENT_BINARY_DIR}/concurrent_outputs 5)
set_tests_properties(concurrent_outputs PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION "concurrent_outputs: passed")
optimus_release_only(concurrent_outputs)  # test_checkpoint's output-file cases, under the sanitizers
# A file written to the last byte or not at all: optimus-plan's JSON under a 4 KiB file-size limit (a full disk).
# Under a file-size limit the write fails with one line (the program ignores SIGXFSZ itself), and its partial file
# goes (no_leftovers.sh fails the test on one).
optimus_expect_failure(optimus_plan_json_full "optimus-plan: error: cannot write 'plan_full.json' .through '.*plan_full.json[.].*[.]partial'.: File too large"
                       bash -c "ulimit -f 4 && exec \"$@\" --json plan_full.json" bash
                       ${CMAKE_CURRENT_SOURCE_DIR}/no_leftovers.sh ".plan_full.json.*.partial"
                       $<TARGET_FILE:optimus-plan> --gpus 16 --device-memory 1GiB --hidden 64 --heads 4 --layers 4
                       --seq 32)
# The main job on the simulated device prints what it prints on the CPU: one process per device under mpiexec (the
# simulated NCCL over MPI), and four ranks of one process sharing a device.
optimus_same_losses(example_train_gpt_sim_in_process "${tiny_gpt};--in-process;4"
                    "${tiny_gpt};--in-process;4;--device;sim;--device-memory;256MiB")
if(OPTIMUS_WITH_MPI)
  optimus_same_losses(example_train_gpt_sim_mpi "${mpi_launch};4;${tiny_gpt}" "${mpi_launch};4;${tiny_gpt};--device;sim")
endif()

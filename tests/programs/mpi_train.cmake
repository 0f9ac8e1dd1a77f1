# train_gpt under mpiexec: the main job, its checkpoints resumed, its refusals.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${mpi_launch}.
# The main job at a tiny size: its reference check must pass and the loss must fall.
if(OPTIMUS_WITH_MPI AND OPTIMUS_BUILD_PROGRAMS)
  add_test(NAME example_train_gpt_smoke
           COMMAND ${mpi_launch} 4 $<TARGET_FILE:train_gpt> --layers 1 --hidden 32 --heads 2 --seq 16 --batch 4
                   --steps 40 --every 20 --sample 20)
  set_tests_properties(example_train_gpt_smoke PROPERTIES LABELS mpi TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "max relative error [0-9.e+-]+ ok")
  optimus_expect_failure(example_train_gpt_bad_heads "train_gpt: error: --heads 3 is not divisible by --q 2"
                         ${mpi_launch} 4 $<TARGET_FILE:train_gpt> --heads 3 --hidden 48 --steps 1)
  optimus_expect_failure(example_train_gpt_bad_size "train_gpt: error: option --device-memory needs a size with a unit"
                         ${mpi_launch} 1 $<TARGET_FILE:train_gpt> --device sim --device-memory 12XB)
  # Checkpoints: 20 steps saving at 10 and 20, then resumed from step 10 on the same layout and on dp = 2 x q = 2 (8
  # ranks): the resumed runs print the uninterrupted run's losses for steps 15 and 20 and its final losses.
  set(save_gpt $<TARGET_FILE:train_gpt> --layers 1 --hidden 32 --heads 2 --seq 16 --batch 4 --steps 20 --every 5
               --sample 0)
  foreach(case "np4;4;OFF" "dp2;8;ON")  # the same layout: exactly; dp 2: within f32 rounding of the printed digits
    list(GET case 0 name)
    list(GET case 1 np)
    list(GET case 2 close)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/resume_${name})
    optimus_resumed_losses(example_train_gpt_resume_${name} ${dir} ${close}
                           "${mpi_launch};4;${save_gpt};--save;${dir};--save-every;10"
                           "${mpi_launch};${np};$<TARGET_FILE:train_gpt>;--every;5;--sample;0;--resume;${dir}/step_10")
    set_tests_properties(example_train_gpt_resume_${name} PROPERTIES LABELS mpi TIMEOUT 180)
    optimus_release_only(example_train_gpt_resume_${name})  # test_checkpoint's resumes, under the sanitizers
  endforeach()
  optimus_expect_failure(example_train_gpt_resume_missing
                         "train_gpt: error: option --resume: '/nonexistent/run' does not exist"
                         ${mpi_launch} 4 $<TARGET_FILE:train_gpt> --resume /nonexistent/run)
  # A half-written checkpoint (the killed save's .partial directory) and one of another model (vocabulary 40 where
  # the text has 76 ids): one line each.
  set_tests_properties(checkpoint_killed_rank PROPERTIES FIXTURES_SETUP killed_save)
  optimus_expect_failure(example_train_gpt_resume_half_written
                         "train_gpt: error: '.*/.step_2.partial' is neither a checkpoint \\(no metadata.json"
                         ${mpi_launch} 4 $<TARGET_FILE:train_gpt> --resume ${fault_dir}/.step_2.partial)
  optimus_expect_failure(example_train_gpt_resume_other_model
                         "train_gpt: error: the checkpoint.s vocabulary has 40 ids but the text.s characters are 76"
                         ${mpi_launch} 4 $<TARGET_FILE:train_gpt> --resume ${fault_dir}/step_1)
  set_tests_properties(example_train_gpt_resume_half_written example_train_gpt_resume_other_model PROPERTIES
                       FIXTURES_REQUIRED killed_save)
  # --in-process under a launcher of several processes: refused by the process count its environment gives, before MPI
  # starts (in-process ranks never start it); the processes then start it to agree on one line.
  optimus_expect_failure(example_train_gpt_in_process_under_mpirun
                         "train_gpt: error: --in-process runs every rank in this process: launch one process, not 2"
                         ${mpi_launch} 2 $<TARGET_FILE:train_gpt> --in-process 2 --steps 1)
  optimus_expect_failure(example_train_gpt_sim_oom "train_gpt: error: --device-memory 65536 bytes cannot hold even the rank's GEMM workspace, its first allocation .sim device 0 out of memory: requested"
                         ${mpi_launch} 4 $<TARGET_FILE:train_gpt> --device sim --device-memory 64KiB --steps 1)
endif()

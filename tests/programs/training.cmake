# train_gpt's training: the shape named as given, the sample's prompt, non-finite losses.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${tiny_gpt}, ${mpi_launch}.
# The model's shape against the layout, named by the options the user gave (not GptConfig's fields).
optimus_expect_failure(example_train_gpt_hidden_q_squared
                       "train_gpt: error: --hidden 30 is not divisible by q\\^2 = 4 .--q 2.: biases and LayerNorm parameters are split q\\^2 ways"
                       $<TARGET_FILE:train_gpt> --in-process 4 --layers 1 --hidden 30 --heads 2 --seq 16 --steps 1)
optimus_expect_failure(example_train_gpt_rope_theta_range "train_gpt: error: option --rope-theta: 0.5 is out of range .1, 1e.12]"
                       ${tiny_gpt} --in-process 1 --q 1 --arch llama --rope-theta 0.5)
optimus_expect_failure(example_train_gpt_llama_kv_heads_split
                       "train_gpt: error: --kv-heads 1 is not divisible by --q 2"
                       ${tiny_gpt} --in-process 4 --arch llama --kv-heads 1)
# A text with none of the sample prompt's characters ("The "): the sample starts from the held-out text's first
# character (it used to fail in sampling, after the training).
string(REPEAT "abcdfgijklmnopqrsuvwxyz" 200 no_prompt_text)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/no_prompt.txt "${no_prompt_text}")
add_test(NAME example_train_gpt_no_prompt_chars
         COMMAND $<TARGET_FILE:train_gpt> --in-process 4 --layers 1 --hidden 32 --heads 2 --seq 16 --batch 4
                 --steps 2 --every 1 --sample 5 --text ${CMAKE_CURRENT_BINARY_DIR}/no_prompt.txt)
set_tests_properties(example_train_gpt_no_prompt_chars PROPERTIES TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "---- sample ----\n[a-z][a-z][a-z][a-z][a-z][a-z]\n----")
# A NaN loss stops the run naming the step; --skip-nonfinite skips such steps, and a run whose every step was
# skipped fails. From the llm.c file above with two tokens' embeddings at 3e38 (their logits overflow).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME make_overflowing_llmc COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/interop/overflow_llmc.py
                                              ${exported_bin} ${overflowing_bin} 32)
  set_tests_properties(make_overflowing_llmc PROPERTIES FIXTURES_REQUIRED exported_llmc
                       FIXTURES_SETUP overflowing_llmc)
  set(overflowing_run $<TARGET_FILE:train_gpt> --in-process 4 --batch 4 --steps 2 --every 1 --sample 0
                      --init ${overflowing_bin})
  optimus_expect_failure(example_train_gpt_nan_loss
                         "train_gpt: error: step 1: the training loss is -?nan. stopping" ${overflowing_run})
  optimus_expect_failure(example_train_gpt_nan_loss_skipped
                         "train_gpt: error: every one of the 2 steps was skipped .a NaN or inf loss or gradient norm.: nothing was trained"
                         ${overflowing_run} --skip-nonfinite)
  # With both streams redirected to one file (stdout fully buffered), the error comes after the banner.
  add_test(NAME example_train_gpt_error_after_banner
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/error_after_output.sh "^Optimus: " "train_gpt: error: step 1"
                   ${overflowing_run})
  set_tests_properties(example_train_gpt_error_after_banner PROPERTIES PASS_REGULAR_EXPRESSION
                       "error after output: passed")
  set_tests_properties(example_train_gpt_nan_loss example_train_gpt_nan_loss_skipped
                       example_train_gpt_error_after_banner PROPERTIES FIXTURES_REQUIRED overflowing_llmc)
endif()
# The mesh named (--dp) or implied: the same run, bit for bit (as printed), 2D and 1D; a --dp that does not fit the
# world refused, naming the product; --plan auto chooses it.
set(mesh_gpt $<TARGET_FILE:train_gpt> --layers 2 --hidden 32 --heads 2 --seq 16 --batch 8 --steps 20 --every 10
             --sample 0 --pp 2)
optimus_same_losses(example_train_gpt_mesh_named "${mesh_gpt};--in-process;16;--q;2"
                    "${mesh_gpt};--in-process;16;--dp;2;--q;2")
optimus_same_losses(example_train_gpt_mesh_named_1d "${mesh_gpt};--in-process;8;--layout;1d;--p;2"
                    "${mesh_gpt};--in-process;8;--layout;1d;--dp;2")
optimus_expect_failure(example_train_gpt_mesh_dp_not_world
                       "train_gpt: error: the mesh dp 3 x pp 2 x q\\^2 4 = 24 ranks does not fit a world of 16 ranks"
                       ${mesh_gpt} --in-process 16 --q 2 --dp 3)
optimus_expect_failure(example_train_gpt_plan_dp "train_gpt: error: --dp with --plan auto: the plan chooses it"
                       ${tiny_gpt} --in-process 4 --plan auto --dp 2)

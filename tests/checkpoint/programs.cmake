# train_gpt's files: checkpoints across grids, Hugging Face and llm.c in and out, shorter
# sequences from a file, Llama's and BERT's directories.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${tiny_gpt}, ${mpi_launch}.
# A checkpoint saved on a 2x2 grid resumed on a 3x3 one (in-process ranks): the vocabulary is padded per grid
# (GptConfig::stored_vocab) and checkpoints hold it unpadded, so the resumed run prints the same losses.
set(resume_dir ${CMAKE_CURRENT_BINARY_DIR}/resume_q3)
set(q3_gpt $<TARGET_FILE:train_gpt> --layers 1 --hidden 36 --heads 6 --ffn 72 --seq 18 --batch 6 --every 5 --sample 0)
optimus_resumed_losses(example_train_gpt_resume_q3 ${resume_dir} ON
                       "${q3_gpt};--in-process;4;--q;2;--steps;20;--save;${resume_dir};--save-every;10"
                       "$<TARGET_FILE:train_gpt>;--in-process;9;--q;3;--every;5;--sample;0;--resume;${resume_dir}/step_10")
set_tests_properties(example_train_gpt_resume_q3 PROPERTIES TIMEOUT 180)
# --export writes a Hugging Face GPT-2 file; --init starts a run from it (its shape is the model's).
set(exported ${CMAKE_CURRENT_BINARY_DIR}/exported_gpt.safetensors)
add_test(NAME example_train_gpt_export COMMAND ${tiny_gpt} --in-process 4 --export ${exported})
set_tests_properties(example_train_gpt_export PROPERTIES FIXTURES_SETUP exported_gpt TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "exported .*exported_gpt.safetensors")
add_test(NAME example_train_gpt_init COMMAND $<TARGET_FILE:train_gpt> --in-process 4 --batch 4 --steps 2 --every 1
                                             --sample 0 --init ${exported})
set_tests_properties(example_train_gpt_init PROPERTIES FIXTURES_REQUIRED exported_gpt TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "model: gpt2 blocks, layers 1, hidden 32, heads 2 [(]2 key/value[)], ffn 128, context 16.*initialized from")
# The same through llm.c's checkpoint format (ffn = 4h, as llm.c has it).
add_test(NAME example_train_gpt_export_llmc COMMAND ${tiny_gpt} --in-process 4 --export ${exported_bin})
set_tests_properties(example_train_gpt_export_llmc PROPERTIES FIXTURES_SETUP exported_llmc TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "exported .*exported_gpt.bin [(]llm.c[)]")
add_test(NAME example_train_gpt_init_llmc COMMAND $<TARGET_FILE:train_gpt> --in-process 4 --batch 4 --steps 2
                                                  --every 1 --sample 0 --init ${exported_bin})
set_tests_properties(example_train_gpt_init_llmc PROPERTIES FIXTURES_REQUIRED exported_llmc TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "context 16.*initialized from .* [(]llm.c[)]")
# A learned position table trains at any shorter length (its first rows; on a 2x2 grid and 1D groups alike, as the
# layers take any sequence up to the table; BERT's below) and is exported whole: its rows past the sequences only
# decayed (interop/position_table.py, with the test venv's numpy; skipped without it). Longer is refused.
function(optimus_shorter_sequences name before seq after)
  add_test(NAME ${name}
           COMMAND bash -c "[[ -x $0 ]] || { echo 'no test venv'; exit 77; }; rm -rf \"$2\" && \"\${@:5}\" --seq \"$4\" --init \"$3\" --export \"$2\" && \"$0\" \"$1\" \"$3\" \"$2\" \"$4\""
                   ${PROJECT_BINARY_DIR}/test-venv/bin/python ${CMAKE_CURRENT_SOURCE_DIR}/interop/position_table.py
                   ${after} ${before} ${seq} ${ARGN})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "context ${seq} .of the table's [0-9]+ positions.*position table kept whole")
endfunction()
optimus_shorter_sequences(example_train_gpt_init_shorter ${exported_bin} 6 ${CMAKE_CURRENT_BINARY_DIR}/shorter_gpt.bin
                          $<TARGET_FILE:train_gpt> --in-process 4 --batch 4 --steps 2 --every 1 --sample 0)
optimus_shorter_sequences(example_train_gpt_init_shorter_1d ${exported_bin} 10
                          ${CMAKE_CURRENT_BINARY_DIR}/shorter_gpt_1d.bin $<TARGET_FILE:train_gpt> --in-process 4
                          --layout 1d --p 2 --batch 4 --steps 2 --every 1 --sample 0)
set_tests_properties(example_train_gpt_init_shorter example_train_gpt_init_shorter_1d PROPERTIES
                     FIXTURES_REQUIRED exported_llmc)
optimus_expect_failure(example_train_gpt_init_longer "train_gpt: error: --seq 32 exceeds .*exported_gpt.bin's 16 positions"
                       $<TARGET_FILE:train_gpt> --in-process 4 --batch 4 --steps 2 --seq 32 --init ${exported_bin})
set_tests_properties(example_train_gpt_init_longer PROPERTIES FIXTURES_REQUIRED exported_llmc)
# Llama's blocks (--arch llama) exported as a Hugging Face Llama directory, which a 1D pipeline starts from; --arch and
# --kv-heads that do not fit are refused.
set(llama_dir ${CMAKE_CURRENT_BINARY_DIR}/exported_llama)
add_test(NAME example_train_gpt_llama_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${llama_dir})
set_tests_properties(example_train_gpt_llama_clean PROPERTIES FIXTURES_SETUP llama_clean)
add_test(NAME example_train_gpt_llama_export
         COMMAND $<TARGET_FILE:train_gpt> --in-process 4 --arch llama --layers 2 --hidden 32 --heads 4 --kv-heads 2
                 --seq 16 --batch 4 --steps 4 --every 2 --sample 0 --export ${llama_dir})
set_tests_properties(example_train_gpt_llama_export PROPERTIES FIXTURES_REQUIRED llama_clean
                     FIXTURES_SETUP exported_llama TIMEOUT 120 PASS_REGULAR_EXPRESSION
                     "model: llama blocks, layers 2, hidden 32, heads 4 [(]2 key/value[)], ffn 88.*reference check[^\n]*ok.*exported .*exported_llama [(]Hugging Face Llama directory[)]")
add_test(NAME example_train_gpt_init_llama
         COMMAND $<TARGET_FILE:train_gpt> --in-process 4 --layout 1d --p 2 --pp 2 --micro-batches 2 --batch 4
                 --steps 2 --every 1 --sample 0 --init ${llama_dir})
set_tests_properties(example_train_gpt_init_llama PROPERTIES FIXTURES_REQUIRED exported_llama TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "model: llama blocks, layers 2, hidden 32, heads 4 [(]2 key/value[)].*initialized from .* [(]Hugging Face Llama[)]")
optimus_expect_failure(example_train_gpt_init_llama_as_gpt2 "train_gpt: error: --arch gpt2 differs from .*exported_llama's blocks"
                       $<TARGET_FILE:train_gpt> --in-process 4 --arch gpt2 --init ${llama_dir})
set_tests_properties(example_train_gpt_init_llama_as_gpt2 PROPERTIES FIXTURES_REQUIRED exported_llama)
# The export's target is checked before training: llm.c's format holds GPT-2's blocks only.
optimus_expect_failure(example_train_gpt_llama_export_llmc
                       "train_gpt: error: --export .*llama.bin: llm.c's file holds GPT-2's blocks, not the model's [(]llama[)]"
                       ${tiny_gpt} --in-process 4 --arch llama --export ${CMAKE_CURRENT_BINARY_DIR}/llama.bin)
optimus_expect_failure(example_train_gpt_kv_heads_without_llama
                       "train_gpt: error: --kv-heads describes --arch llama's blocks, not --arch gpt2's"
                       ${tiny_gpt} --in-process 4 --kv-heads 1)
optimus_expect_failure(example_train_gpt_bert_kv_heads
                       "train_gpt: error: --kv-heads describes --arch llama's blocks, not --arch bert's"
                       ${tiny_gpt} --in-process 4 --arch bert --kv-heads 1)
# BERT, a masked LM on the text (its special ids after the characters): the first step against the fp64 reference,
# then training below the unigram entropy. Resumed on another layout without --arch (the checkpoint's blocks, its
# masking and its vocabulary of characters and special ids): the uninterrupted run's losses.
add_test(NAME example_train_bert
         COMMAND $<TARGET_FILE:train_gpt> --in-process 4 --arch bert --layers 2 --hidden 32 --heads 2 --seq 16
                 --batch 8 --steps 100 --every 50 --lr 1e-2)
# The same program as optimus-train (the build's link to train_gpt), which names itself so.
add_test(NAME example_optimus_train_bert
         COMMAND $<TARGET_FILE_DIR:train_gpt>/optimus-train --in-process 4 --arch bert --layers 1 --hidden 32
                 --heads 2 --seq 8 --batch 4 --steps 2 --every 1)
set_tests_properties(example_optimus_train_bert PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION
                     "masked LM.*max relative error [0-9.e+-]+ ok.*final training loss")
optimus_expect_failure(example_optimus_train_bad_mask_prob "optimus-train: error: --mask-prob 1 masks every position"
                       $<TARGET_FILE_DIR:train_gpt>/optimus-train --in-process 4 --arch bert --mask-prob 1)
set_tests_properties(example_train_bert PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION
                     "character-level masked LM.*bert blocks.*special ids PAD [0-9]+, CLS.*max relative error [0-9.e+-]+ ok.*below the unigram entropy")
# Release only (100 steps): the sanitizers train BERT in example_train_bert_resume_other_layout, _export, _init.
optimus_release_only(example_train_bert)
set(tiny_bert $<TARGET_FILE:train_gpt> --in-process 4 --arch bert --layers 2 --hidden 32 --heads 2 --batch 4 --steps 20
              --every 10)
set(bert_dir ${CMAKE_CURRENT_BINARY_DIR}/bert_resume)
optimus_resumed_losses(example_train_bert_resume_other_layout ${bert_dir} ON
                       "${tiny_bert};--seq;16;--mask-prob;0.3;--save;${bert_dir};--save-every;10"
                       "$<TARGET_FILE:train_gpt>;--in-process;4;--layout;1d;--pp;2;--every;10;--resume;${bert_dir}/step_10")
set_tests_properties(example_train_bert_resume_other_layout PROPERTIES TIMEOUT 120)
# A masked LM's bad options, each one line: name|the line|the options.
foreach(entry
    "pad_id_outside|--pad-id 500 is outside the model's vocabulary .0, [0-9]+.|--pad-id 500"
    "same_ids|--sep-id and --mask-id are both 79: the special ids must differ|--sep-id 79 --mask-id 79"
    "mask_prob_one|--mask-prob 1 masks every position. it must be in .0, 1.|--mask-prob 1"
    "mask_prob_zero|option --mask-prob: 0 is out of range|--mask-prob 0"
    "seq_too_short|--seq 4 cannot hold a masked LM's .CLS. A .SEP. B .SEP. .at least 5.|--seq 4"
    "sample|--sample 10: a masked LM .bert blocks. does not generate text|--sample 10"
    "export_llmc|--export .*bert.bin: llm.c's file holds GPT-2's blocks, not the model's .bert.|--export ${CMAKE_CURRENT_BINARY_DIR}/bert.bin"
    "init_llama|--arch bert differs from .*exported_llama's blocks .llama.|--init ${CMAKE_CURRENT_BINARY_DIR}/exported_llama")
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 line)
  list(GET parts 2 options)
  separate_arguments(options UNIX_COMMAND "${options}")
  optimus_expect_failure(example_train_bert_${name} "train_gpt: error: ${line}"
                         ${tiny_bert} ${options})
endforeach()
set_tests_properties(example_train_bert_init_llama PROPERTIES FIXTURES_REQUIRED exported_llama)
# BERT exported as a Hugging Face BERT directory (BertForMaskedLM), which a 1D pipeline starts from.
set(bert_export ${CMAKE_CURRENT_BINARY_DIR}/exported_bert)
add_test(NAME example_train_bert_export_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${bert_export})
set_tests_properties(example_train_bert_export_clean PROPERTIES FIXTURES_SETUP bert_clean)
add_test(NAME example_train_bert_export COMMAND ${tiny_bert} --seq 8 --export ${bert_export})
set_tests_properties(example_train_bert_export PROPERTIES FIXTURES_REQUIRED bert_clean FIXTURES_SETUP exported_bert
                     TIMEOUT 120 PASS_REGULAR_EXPRESSION "exported .*exported_bert [(]Hugging Face BERT directory[)]")
add_test(NAME example_train_bert_init
         COMMAND $<TARGET_FILE:train_gpt> --in-process 4 --layout 1d --p 2 --pp 2 --micro-batches 2 --batch 4
                 --steps 2 --every 1 --init ${bert_export})
set_tests_properties(example_train_bert_init PROPERTIES FIXTURES_REQUIRED exported_bert TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "masked LM.*model: bert blocks, layers 2, hidden 32.*context 8.*initialized from .* [(]Hugging Face BERT[)]")
# A Hugging Face directory of another model_type (or none) is refused naming it and what Optimus reads (it was read as
# a Llama and refused for a field: "hidden_act = "gelu"", "head_dim = null").
foreach(entry "none|config.json has no model_type, so the model it describes is unknown|/\"model_type\": \"bert\",\\?/d"
              "upper|config.json's model_type is \"BERT\". Optimus reads Hugging Face directories of model_type \"llama\" and \"bert\"|s/\"model_type\": \"bert\"/\"model_type\": \"BERT\"/"
              "mixtral|config.json's model_type is \"mixtral\"|s/\"model_type\": \"bert\"/\"model_type\": \"mixtral\"/")
  string(REPLACE "|" ";" entry "${entry}")
  list(GET entry 0 name)
  list(GET entry 1 line)
  list(GET entry 2 edit)
  set(variant ${CMAKE_CURRENT_BINARY_DIR}/hf_model_type_${name})
  optimus_expect_failure(example_train_gpt_hf_model_type_${name} "train_gpt: error: '.*hf_model_type_${name}': ${line}"
                         bash -c "rm -rf \"$1\" && cp -r \"$0\" \"$1\" && sed -i -e \"$2\" \"$1/config.json\" && exec \"\${@:3}\" --init \"$1\""
                         ${bert_export} ${variant} "${edit}" $<TARGET_FILE:train_gpt> --in-process 1 --q 1 --steps 1)
  set_tests_properties(example_train_gpt_hf_model_type_${name} PROPERTIES FIXTURES_REQUIRED exported_bert)
endforeach()
# A file's model of no blocks (num_hidden_layers 0, no layer tensors) is named as such (it was "pipeline: 0 layers do
# not divide among 1 stages").
if(Python3_Interpreter_FOUND)
  optimus_expect_failure(example_train_gpt_init_no_layers
                         "train_gpt: error: the model of --init '.*bert_no_layers': layers = 0: a model needs at least one block"
                         bash -c "\"$0\" \"$1\" \"$2\" \"$3\" && exec \"\${@:4}\" --init \"$3\""
                         ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/interop/hf_without_layers.py ${bert_export}
                         ${CMAKE_CURRENT_BINARY_DIR}/bert_no_layers $<TARGET_FILE:train_gpt> --in-process 1 --q 1
                         --steps 1)
  set_tests_properties(example_train_gpt_init_no_layers PROPERTIES FIXTURES_REQUIRED exported_bert)
endif()
# BERT's learned positions at a shorter length, through a pipeline (optimus_shorter_sequences above): all 8 rows
# exported.
optimus_shorter_sequences(example_train_bert_init_shorter ${bert_export} 6 ${CMAKE_CURRENT_BINARY_DIR}/shorter_bert
                          $<TARGET_FILE_DIR:train_gpt>/optimus-train --arch bert --in-process 4 --pp 2 --q 1
                          --micro-batches 2 --batch 4 --steps 2 --every 1)
set_tests_properties(example_train_bert_init_shorter PROPERTIES FIXTURES_REQUIRED exported_bert)
# A text's special ids follow its characters: one of them as a special id is refused, naming the character.
optimus_expect_failure(example_train_bert_special_id_a_character
                       "train_gpt: error: --pad-id 5 is the id of the text's character '.' .byte 41.: a special id must lie outside the text's ids .0, 76."
                       ${tiny_bert} --cls-id 3 --sep-id 4 --pad-id 5 --mask-id 6)
optimus_expect_failure(example_train_bert_special_id_newline
                       "train_gpt: error: --pad-id 0 is the id of the text's byte 10 .not printable."
                       ${tiny_bert} --pad-id 0)
optimus_expect_failure(example_train_gpt_mask_prob_without_bert
                       "train_gpt: error: --mask-prob describes a masked LM's data [(]--arch bert[)], not the model's gpt2 blocks"
                       ${tiny_gpt} --in-process 4 --mask-prob 0.2)

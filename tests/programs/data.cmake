# train_gpt on token files (--data), BERT on them, outputs over inputs, micro-batches.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${tiny_gpt}, ${mpi_launch}.
# --data: GPT-2 token files (llm.c's format to train on, nanoGPT's raw uint16 to hold out), vocabulary 50257; llm.c's
# version 2 (uint32 ids, Llama 3's vocabulary of 128256); any vocabulary the ids fit (--vocab).
add_executable(make_tokens interop/make_tokens.cpp)
target_link_libraries(make_tokens PRIVATE optimus::optimus)
optimus_target_defaults(make_tokens)
set(tokens_dir ${CMAKE_CURRENT_BINARY_DIR}/tokens)
add_test(NAME make_token_files COMMAND make_tokens ${tokens_dir} 20000)
set_tests_properties(make_token_files PROPERTIES FIXTURES_SETUP token_files)
set(data_gpt $<TARGET_FILE:train_gpt> --in-process 4 --layers 1 --hidden 32 --heads 2 --seq 16 --batch 4 --sample 8)
add_test(NAME example_train_gpt_data
         COMMAND ${data_gpt} --data ${tokens_dir}/train_tokens.bin,${tokens_dir}/val_tokens.bin --steps 10 --every 5)
set_tests_properties(example_train_gpt_data PROPERTIES FIXTURES_REQUIRED token_files TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "llm.c.*vocabulary 50257.*final training loss [0-9.]+ nats/token, held-out loss [0-9.]+")
add_test(NAME example_train_gpt_data_uint32
         COMMAND ${data_gpt} --data ${tokens_dir}/llama_tokens.bin --steps 4 --every 2)
add_test(NAME example_train_gpt_data_vocab
         COMMAND ${data_gpt} --data ${tokens_dir}/small_vocab.bin --vocab 1000 --steps 4 --every 2)
set_tests_properties(example_train_gpt_data_uint32 example_train_gpt_data_vocab PROPERTIES
                     FIXTURES_REQUIRED token_files TIMEOUT 120)
set_tests_properties(example_train_gpt_data_uint32 PROPERTIES
                     PASS_REGULAR_EXPRESSION "llm.c.*vocabulary 128256.*final training loss [0-9.]+ nats/token")
# Release only (20 s under ASan, Llama 3's vocabulary): the sanitizers read uint32 token files in test_checkpoint's
# token-file cases and fuzz_llmc.
optimus_release_only(example_train_gpt_data_uint32)
set_tests_properties(example_train_gpt_data_vocab PROPERTIES
                     PASS_REGULAR_EXPRESSION "llm.c.*vocabulary 1000,.*final training loss [0-9.]+ nats/token")
# BERT on token ids: special ids the data does not hold (its ids are below 1000), in a vocabulary widened for them;
# bert-base-uncased's by default, which such data holds (ids 0, 101, 102, 103 among its random ones): refused, or
# taken as the data's own with --specials-in-data (a tokenizer's files). They were accepted, and then neither masked
# nor told apart from the data's ids; so were a text's characters as special ids.
set(bert_data $<TARGET_FILE:train_gpt> --in-process 4 --arch bert --layers 1 --hidden 32 --heads 2 --seq 16 --batch 4
              --data ${tokens_dir}/small_vocab.bin --steps 4 --every 2)
add_test(NAME example_train_bert_data
         COMMAND ${bert_data} --vocab 1004 --pad-id 1000 --cls-id 1001 --sep-id 1002 --mask-id 1003)
set_tests_properties(example_train_bert_data PROPERTIES FIXTURES_REQUIRED token_files TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "token-level masked LM.*special ids PAD 1000, CLS 1001, SEP 1002, MASK 1003.*max relative error [0-9.e+-]+ ok.*final training loss [0-9.]+ nats/token")
add_test(NAME example_train_bert_data_own_specials COMMAND ${bert_data} --vocab 1000 --specials-in-data)
set_tests_properties(example_train_bert_data_own_specials PROPERTIES FIXTURES_REQUIRED token_files TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "special ids PAD 0, CLS 101, SEP 102, MASK 103.*final training loss")
optimus_expect_failure(example_train_bert_data_default_specials
                       "train_gpt: error: --pad-id .the default. 0 is an id of the token data .[0-9]+ times.: a special id must lie outside the data's ids"
                       ${bert_data} --vocab 1000)
optimus_expect_failure(example_train_bert_data_mask_id_in_data
                       "train_gpt: error: --mask-id 843 is an id of the token data .[0-9]+ times."
                       ${bert_data} --vocab 1004 --pad-id 1000 --cls-id 1001 --sep-id 1002 --mask-id 843)
set_tests_properties(example_train_bert_data_own_specials example_train_bert_data_default_specials
                     example_train_bert_data_mask_id_in_data PROPERTIES FIXTURES_REQUIRED token_files)
optimus_expect_failure(example_train_gpt_data_vocab_too_small
                       "train_gpt: error: the token data holds id 50[0-9]+, outside --vocab's vocabulary of 1000 ids"
                       ${data_gpt} --data ${tokens_dir}/train_tokens.bin --vocab 1000)
optimus_expect_failure(example_train_gpt_vocab_without_data
                       "train_gpt: error: --vocab sizes a model for --data's token ids"
                       ${data_gpt} --vocab 1000)
set_tests_properties(example_train_gpt_data_vocab_too_small PROPERTIES FIXTURES_REQUIRED token_files)
# nanoGPT's raw uint16 when told so; never guessed: a raw file read as llm.c's, and an llm.c file whose magic is
# damaged, are refused (make_tokens writes both).
add_test(NAME example_train_gpt_data_raw
         COMMAND ${data_gpt} --data ${tokens_dir}/train_raw.bin --data-format raw --steps 10 --every 5)
set_tests_properties(example_train_gpt_data_raw PROPERTIES FIXTURES_REQUIRED token_files TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "raw uint16.*final training loss [0-9.]+ nats/token")
optimus_expect_failure(example_train_gpt_data_raw_as_llmc
                       "train_gpt: error: token file '.*train_raw.bin' is not an llm.c token file: it starts with"
                       ${data_gpt} --data ${tokens_dir}/train_raw.bin)
optimus_expect_failure(example_train_gpt_data_bad_magic
                       "train_gpt: error: token file '.*bad_magic.bin' is not an llm.c token file: it starts with 20240521"
                       ${data_gpt} --data ${tokens_dir}/bad_magic.bin)
# Exactly one sequence and its target is enough (it was refused as fewer).
add_test(NAME example_train_gpt_data_one_window
         COMMAND ${data_gpt} --data ${tokens_dir}/train_tokens.bin,${tokens_dir}/seventeen.bin --steps 2 --every 1)
set_tests_properties(example_train_gpt_data_one_window PROPERTIES FIXTURES_REQUIRED token_files TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "held-out loss [0-9.]+")
# Outputs never replace inputs or anything but a regular file.
optimus_expect_failure(example_train_gpt_export_over_data
                       "train_gpt: error: option --export '.*train_tokens.bin' is --data's input"
                       ${data_gpt} --data ${tokens_dir}/train_tokens.bin --export ${tokens_dir}/train_tokens.bin)
optimus_expect_failure(example_train_gpt_export_device
                       "train_gpt: error: option --export: '/dev/full' is a character device: only a regular file"
                       ${data_gpt} --export /dev/full)
set_tests_properties(example_train_gpt_data_raw_as_llmc example_train_gpt_data_bad_magic
                     example_train_gpt_export_over_data PROPERTIES FIXTURES_REQUIRED token_files)
# Micro-batches and full recomputation: the same losses within f32 rounding, a lower peak of saved activations.
add_test(NAME example_train_gpt_micro_batches
         COMMAND ${CMAKE_COMMAND} "-DFIRST=${tiny_gpt8};--in-process;4"
                 "-DSECOND=${tiny_gpt8};--in-process;4;--micro-batches;4;--recompute;full"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/close_losses.cmake)
set_tests_properties(example_train_gpt_micro_batches PROPERTIES TIMEOUT 120)

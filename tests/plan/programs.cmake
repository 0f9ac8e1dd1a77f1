# optimus-plan and train_gpt --plan auto.
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${mpi_launch}.
# optimus-plan: the 64-GPU table (2D against 1D), tensor parallelism alone, and infeasible requests (one line each).
add_test(NAME optimus_plan_h100 COMMAND optimus-plan --gpus 64 --gpus-per-node 8 --device-memory 80GiB --hidden 8192
                                        --heads 64 --layers 48 --seq 2048 --top 5)
set_tests_properties(optimus_plan_h100 PROPERTIES LABELS "plan;long" PASS_REGULAR_EXPRESSION  # 2 s; 2 min in Debug
                     "# best 2D: 2D q=[0-9]+ .* ms per step.*# best 1D: 1D t=[0-9]+ .* ms per step")
# A Llama-3-8B-shaped model (GQA 32/8, SwiGLU 14336, vocabulary 128256, untied head) on 64 H100s: the planner knows
# Llama's blocks (the parameter count is Meta's 8.03e9 exactly).
add_test(NAME optimus_plan_llama3_8b COMMAND optimus-plan --gpus 64 --arch llama --hidden 4096 --heads 32 --kv-heads 8
                                             --layers 32 --ffn 14336 --seq 8192 --batch 512 --top 3)
set_tests_properties(optimus_plan_llama3_8b PROPERTIES LABELS "plan;long" TIMEOUT 120 PASS_REGULAR_EXPRESSION
                     "GPT of llama blocks h=4096 heads=32 kv_heads=8 layers=32 ffn=14336 vocab=128256 [(]8030261248 parameters[)].*best 2D: .*best 1D: ")
add_test(NAME optimus_plan_tensor_only COMMAND optimus-plan --gpus 64 --device-memory 80GiB --hidden 8192 --heads 64
                                               --layers 48 --seq 2048 --dp 1 --pp 1 --runnable --top 3)
set_tests_properties(optimus_plan_tensor_only PROPERTIES LABELS plan PASS_REGULAR_EXPRESSION
                     "\n1 +2D q=8 dp=1 pp=1 m=1 offload=none .*fastest")
optimus_expect_failure(optimus_plan_no_memory "optimus-plan: error: nothing fits in 64 MiB of device memory per rank: the least any of the [0-9]+ layouts of 8 GPUs needs is"
                       $<TARGET_FILE:optimus-plan> --gpus 8 --device-memory 64MiB --hidden 4096 --heads 32 --layers 24
                       --seq 1024 --max-micro-batches 2)
optimus_expect_failure(optimus_plan_no_layout "optimus-plan: error: no layout of 7 GPUs satisfies the model's shapes"
                       $<TARGET_FILE:optimus-plan> --gpus 7 --batch 8 --hidden 64 --heads 4 --layers 4 --seq 32)
# Where the request's own choices leave nothing, the message names them (it blamed the model's shapes).
optimus_expect_failure(optimus_plan_no_layout_dp "optimus-plan: error: no layout of 4 GPUs with dp = 5 .--dp, which does not divide the GPUs. satisfies the model's shapes .*. without those choices [0-9]+ layouts do"
                       $<TARGET_FILE:optimus-plan> --gpus 4 --dp 5 --hidden 64 --heads 4 --layers 4 --seq 32)
optimus_expect_failure(optimus_plan_missing "optimus-plan: error: the plan needs --gpus, --hidden, --heads, --layers and --seq"
                       $<TARGET_FILE:optimus-plan> --gpus 8)
# train_gpt --plan auto: the planner's layout for 4 in-process ranks, checked against the reference and trained.
add_test(NAME example_train_gpt_plan_auto
         COMMAND train_gpt --plan auto --in-process 4 --layers 2 --hidden 32 --heads 2 --seq 16 --batch 8 --steps 4
                 --every 2 --sample 0)
set_tests_properties(example_train_gpt_plan_auto PROPERTIES LABELS plan TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "--plan auto: [0-9]+ layouts of 4 ranks.*\n  1 +2D q=.*reference check .* ok.*step +4 +loss")
optimus_expect_failure(example_train_gpt_plan_conflict "train_gpt: error: --q with --plan auto: the plan chooses it"
                       $<TARGET_FILE:train_gpt> --plan auto --q 2)

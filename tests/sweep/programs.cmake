# optimus-sweep's members against their train_gpt runs, spilled members, a killed sweep
# resumed, a simulated device too small (its faults and refusals: tests/sweep/CMakeLists.txt).
# Included by tests/CMakeLists.txt, in its scope: it uses optimus_expect_failure, ${tiny_gpt}, ${mpi_launch}.
# optimus-sweep: each member trains bitwise as train_gpt trains it alone — its printed losses and its export — on 1
# and 2 slots in-process under each scheduler, on simulated devices and on 4 MPI ranks (docs/design.md, "Sweeps");
# a member whose loss is not finite (the overflowing model above) stops alone, named, and the others finish.
set(sweep_base "--layers 4 --hidden 32 --heads 2 --seq 16 --batch 4 --steps 4 --every 2 --sample 0")
function(optimus_sweep_equals_solo name args launch)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DSWEEP=$<TARGET_FILE:optimus-sweep> -DTRAIN=$<TARGET_FILE:train_gpt>
                   "-DBASE=${sweep_base}" -DLRS=1e-3,3e-3 -DSEEDS=1,2 "-DARGS=${args}" "-DLAUNCH=${launch}"
                   -DDIR=${CMAKE_CURRENT_BINARY_DIR}/${name} ${ARGN}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/sweep_equals_solo.cmake)
  set_tests_properties(${name} PROPERTIES LABELS sweep TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "members: the losses and exports of their runs alone")
endfunction()
optimus_sweep_equals_solo(sweep_equals_solo_d1_lrtf "--in-process 1 --scheduler lrtf" "")
optimus_sweep_equals_solo(sweep_equals_solo_d2_round_robin "--in-process 2 --scheduler round-robin" "")
optimus_sweep_equals_solo(sweep_equals_solo_d2_model_parallel "--in-process 2 --scheduler model-parallel" "")
optimus_sweep_equals_solo(sweep_equals_solo_d2_sim "--in-process 2 --device sim --scheduler lrtf" "")
# Slots of 2 x 2 ranks (Optimus's 2D inside the sweep): 2 slots on 8 in-process ranks, each member bitwise its
# train_gpt run on one 2 x 2 grid.
optimus_sweep_equals_solo(sweep_equals_solo_q2_slots "--in-process 8 --q 2 --scheduler lrtf" ""
                          "-DSOLO=--q 2 --in-process 4")
if(OPTIMUS_WITH_MPI)
  string(JOIN " " sweep_mpi_launch ${mpi_launch} 4)
  optimus_sweep_equals_solo(sweep_equals_solo_mpi4_lrtf "--scheduler lrtf" "${sweep_mpi_launch}")
  # Devices in separate processes on 4 slots: the exchanged ends' sums between stages that are not neighbours travel
  # on their own channel (the device communicators match messages in order, not by tag).
  optimus_sweep_equals_solo(sweep_equals_solo_mpi4_sim "--device sim --in-flight 1 --scheduler lrtf"
                            "${sweep_mpi_launch}")
endif()
# Members larger than the slot: alone, one needs 18.4 MiB of device memory (refused on 10 MiB); spilled
# (spill+activations), they take turns with the slot's memory one at a time (--in-flight 1), each still bitwise its
# plain run on the CPU: on one slot in-process, and on 2 MPI ranks with a device of 10 MiB each (each slot holds its
# stage of every member's embedding or head, and the device communicators' buffers).
set(sweep_big "--layers 4 --hidden 128 --heads 4 --seq 32 --batch 4 --steps 3 --every 3 --sample 0")
separate_arguments(sweep_big_list UNIX_COMMAND "${sweep_big}")
# A simulated device too small is named with the model's bytes before the first large allocation (it failed on
# the first buffer: "requested 8 bytes ... 0 bytes free"), or with the GEMM workspace that comes first of all.
optimus_expect_failure(example_train_gpt_device_too_small
                       "train_gpt: error: not enough device memory: each rank's device needs [0-9]+ bytes .* and --device-memory gives 1126400 bytes"
                       ${tiny_gpt} --in-process 1 --q 1 --device sim --device-memory 1100KiB)
# Before the grids take their buffers: eight in-process ranks whose GEMM workspaces just fill 8 MiB (it failed on the
# grids' first buffer, "requested 8 bytes ... 0 bytes free").
optimus_expect_failure(example_train_gpt_device_before_grids
                       "train_gpt: error: not enough device memory: the 8 ranks' device needs [0-9]+ bytes .* and --device-memory gives 8388608 bytes"
                       ${tiny_gpt8} --in-process 8 --q 2 --device sim --device-memory 8MiB)
optimus_expect_failure(example_train_gpt_device_smaller_than_workspace
                       "train_gpt: error: --device-memory 2097152 bytes cannot hold even the in-process ranks' GEMM workspaces"
                       ${tiny_gpt} --in-process 4 --device sim --device-memory 2MiB)
optimus_expect_failure(sweep_member_alone_out_of_memory "train_gpt: error: not enough device memory: each rank's device needs [0-9]+ bytes .18.4 MiB."
                       $<TARGET_FILE:train_gpt> ${sweep_big_list} --q 1 --in-process 1 --device sim --device-memory 10MiB)
set(sweep_spilled "--device sim --device-memory 10MiB --offload spill+activations --in-flight 1")
add_test(NAME sweep_spilled_members_larger_than_slot
         COMMAND ${CMAKE_COMMAND} -DSWEEP=$<TARGET_FILE:optimus-sweep> -DTRAIN=$<TARGET_FILE:train_gpt>
                 "-DBASE=${sweep_big}" -DLRS=1e-3,3e-3 -DSEEDS=1,2 "-DARGS=--in-process 1 ${sweep_spilled}" "-DLAUNCH="
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR}/sweep_spilled_members_larger_than_slot
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/sweep_equals_solo.cmake)
set_tests_properties(sweep_spilled_members_larger_than_slot PROPERTIES LABELS "sweep;sim" TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "members: the losses and exports of their runs alone")
if(OPTIMUS_WITH_MPI)
  string(JOIN " " sweep_mpi2_launch ${mpi_launch} 2)
  add_test(NAME sweep_spilled_members_mpi2
           COMMAND ${CMAKE_COMMAND} -DSWEEP=$<TARGET_FILE:optimus-sweep> -DTRAIN=$<TARGET_FILE:train_gpt>
                   "-DBASE=${sweep_big}" -DLRS=1e-3 -DSEEDS=1,2
                   "-DARGS=--device sim --device-memory 10MiB --offload spill+activations --in-flight 1"
                   "-DLAUNCH=${sweep_mpi2_launch}"
                   -DDIR=${CMAKE_CURRENT_BINARY_DIR}/sweep_spilled_members_mpi2
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/sweep_equals_solo.cmake)
  set_tests_properties(sweep_spilled_members_mpi2 PROPERTIES LABELS "sweep;sim;mpi" TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "members: the losses and exports of their runs alone")
endif()
# Refused before any training, each error naming the member: a member that does not fit a slot even spilled one
# block at a time (the memory model's bytes against --device-memory), and one whose blocks do not divide among the
# slots' stages.
set(sweep_bad_file ${CMAKE_CURRENT_BINARY_DIR}/sweep_bad.json)
string(REPLACE "--layers 4" "--layers 3" sweep_three "${sweep_big}")
file(WRITE ${sweep_bad_file} "{\"members\": [{\"name\": \"ok\", \"options\": \"${sweep_big}\"},
{\"name\": \"three\", \"options\": \"${sweep_three}\"}]}\n")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/sweep_not_json.json "{\"members\": [oops")
optimus_expect_failure(sweep_file_not_json "optimus-sweep: error: .*sweep_not_json.json: not JSON .*parse error"
                       $<TARGET_FILE:optimus-sweep> ${CMAKE_CURRENT_BINARY_DIR}/sweep_not_json.json --in-process 1)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/sweep_out_of_range.json
     "{\"members\": [{\"name\": \"a\", \"options\": \"--steps 2\"}, {\"name\": \"hot\", \"options\": \"--lr 99\"}]}")
optimus_expect_failure(sweep_member_value_out_of_range
                       "optimus-sweep: error: .*sweep_out_of_range.json: member 'hot': option --lr: 99 is out of range"
                       $<TARGET_FILE:optimus-sweep> ${CMAKE_CURRENT_BINARY_DIR}/sweep_out_of_range.json --in-process 1)
if(OPTIMUS_WITH_MPI)
  # Devices in separate processes exchange on each slot's one stream: members there train one at a time.
  optimus_expect_failure(sweep_devices_across_processes_interleaved
                         "optimus-sweep: error: 2 slots on devices in separate processes train one member at a time"
                         ${mpi_launch} 2 $<TARGET_FILE:optimus-sweep> ${CMAKE_CURRENT_BINARY_DIR}/sweep_bad.json
                         --device sim --scheduler round-robin)
endif()
optimus_expect_failure(sweep_member_does_not_fit
                       "optimus-sweep: error: .*sweep_bad.json: member 'ok' needs [0-9]+ bytes .* on the in-process ranks' device with its step in flight .* has 4194304 bytes .*: it does not fit even alone, give the sweep more slots or a larger device"
                       $<TARGET_FILE:optimus-sweep> ${sweep_bad_file} --in-process 1 --device sim --device-memory 4MiB
                       --offload spill+activations)
optimus_expect_failure(sweep_member_layers_do_not_divide
                       "optimus-sweep: error: .*sweep_bad.json: member 'three': pipeline: 3 layers do not divide among 2 stages"
                       $<TARGET_FILE:optimus-sweep> ${sweep_bad_file} --in-process 2)
# Under the sanitizers the runtime's paths run in test_sweep and the in-process sweeps above; these repeat them on
# MPI ranks, one member at a time and on the simulated device.
optimus_release_only(sweep_equals_solo_d2_model_parallel sweep_equals_solo_d2_sim)
if(OPTIMUS_WITH_MPI)
  optimus_release_only(sweep_equals_solo_mpi4_lrtf sweep_spilled_members_mpi2)
endif()
add_test(NAME sweep_killed_resumes
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sweep_killed_resume.sh $<TARGET_FILE:optimus-sweep>
                 ${CMAKE_CURRENT_BINARY_DIR}/sweep_killed_resumes --in-process 2)
set_tests_properties(sweep_killed_resumes PROPERTIES LABELS sweep TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "killed and resumed: the exports of the uninterrupted sweep.*resumed again: finished members exported as they were, an added one trained")
if(Python3_Interpreter_FOUND)
  optimus_sweep_equals_solo(sweep_member_nan_stops_alone "--in-process 1" ""
                            "-DSTOPPED_MEMBER=overflowing|--init ${overflowing_bin} --batch 4 --steps 2 --every 1 --sample 0")
  set_tests_properties(sweep_member_nan_stops_alone PROPERTIES FIXTURES_REQUIRED overflowing_llmc)
endif()

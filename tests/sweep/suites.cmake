# sweep's suites (included from tests/CMakeLists.txt, in its scope): a sweep's members, its schedulers, file and
# runtime.
if(TARGET optimus_program_options)  # a sweep's members, checked with train_gpt's table
  optimus_add_test(test_sweep_members SOURCES sweep/test_sweep_members.cpp LIBS optimus_program_options LABELS sweep)
endif()
# The sweep's schedulers (optimus/sweep, docs/design.md "Sweeps").
optimus_add_test(test_sweep SOURCES sweep/test_sweep_schedule.cpp sweep/test_sweep_file.cpp sweep/test_sweep_runtime.cpp LIBS nlohmann_json::nlohmann_json optimus_test_cases LABELS sweep)

# plan's suites (included from tests/CMakeLists.txt, in its scope).
# The planner (optimus/plan, docs/planner.md).
optimus_add_test(test_plan SOURCES plan/test_plan.cpp plan/memory_model_cases.cpp
                 LIBS optimus_test_cases nlohmann_json::nlohmann_json)

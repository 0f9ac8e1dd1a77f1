# pipeline's suites (included from tests/CMakeLists.txt, in its scope): schedules, message-driven orders, pipelined
# GPTs in-process and under MPI.
optimus_add_test(test_pipeline SOURCES pipeline/test_schedule.cpp pipeline/test_dynamic_order.cpp pipeline/test_pipeline_gpt.cpp
                 pipeline/pipeline_gpt_cases.cpp LIBS optimus_test_cases)
if(OPTIMUS_WITH_MPI)
  optimus_add_test(test_pipeline_mpi SOURCES pipeline/test_pipeline_mpi.cpp pipeline/pipeline_gpt_cases.cpp
                   LIBS optimus_test_cases RANKS 2 4 8 16)
endif()

# cmake -P script: SAVE (a ;-list) must die (a rank kills itself in the middle of a save: non-zero exit; its own
# last words may be lost as the job is torn down), then VERIFY must exit 0 and print that the previous checkpoint
# loads and verifies.
execute_process(COMMAND ${SAVE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR out MATCHES "the save was not interrupted")
  message(FATAL_ERROR "the save was expected to die with rank 2 killed (exit ${rc}):\n${out}${err}")
endif()
execute_process(COMMAND ${VERIFY} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "step_1 loads and verifies")
  message(FATAL_ERROR "verify (exit ${rc}):\n${out}${err}")
endif()
message(STATUS "killed mid-save; the previous checkpoint loads and verifies")

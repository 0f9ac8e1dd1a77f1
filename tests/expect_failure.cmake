# cmake -P script: runs COMMAND (a ;-list) and passes only if it exits non-zero and its output has exactly
# one line matching LINE (the program's single, clear error line).
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
string(REPLACE ";" "," all "${all}")  # so that a line is one list element
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit, got 0; output:\n${all}")
endif()
string(REGEX MATCHALL "[^\n]*${LINE}[^\n]*" hits "${all}")
list(LENGTH hits n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected exactly one line matching '${LINE}', found ${n}; output:\n${all}")
endif()
message(STATUS "exit ${rc}, one error line: ${hits}")

# cmake -P script: runs FIRST and SECOND (each a ;-list) and passes only if both exit 0 and print the same training
# record: the reference check's verdict, every "step N loss X" and the final training and held-out losses. The
# simulated device promises the CPU's arithmetic, so a run on it must print what the CPU run prints. With -DCHECKED=ON
# only the reference check's verdict is compared, not its error (the runs check differently cut models: pipelines).
function(record command out)
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "exit ${rc}: ${command}\n${text}${err}")
  endif()
  string(REGEX MATCHALL "step +[0-9]+ +loss [0-9.]+|final training loss [0-9.]+ nats/char, held-out loss [0-9.]+|max relative error [0-9.e+-]+ ok"
         lines "${text}")
  if(CHECKED)
    string(REGEX REPLACE "max relative error [0-9.e+-]+ ok" "reference check ok" lines "${lines}")
  endif()
  list(LENGTH lines n)
  if(n LESS 3)
    message(FATAL_ERROR "no training record (${n} lines) in the output of ${command}:\n${text}")
  endif()
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

record("${FIRST}" first)
record("${SECOND}" second)
if(NOT first STREQUAL second)
  string(REPLACE ";" "\n  " first "${first}")
  string(REPLACE ";" "\n  " second "${second}")
  message(FATAL_ERROR "the runs differ:\n  ${first}\nand\n  ${second}")
endif()
list(LENGTH first n)
message(STATUS "the same ${n} lines")

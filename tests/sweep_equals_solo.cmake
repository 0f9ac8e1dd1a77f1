# cmake -P script: a sweep's members each train bitwise as train_gpt trains them alone. The members are BASE (train_gpt's
# words, a string) with each learning rate of LRS and each seed of SEEDS (comma-separated); optionally STOPPED_MEMBER
# ("NAME|WORDS"), a member whose loss is not finite, which must stop alone. Runs each member alone
# (TRAIN WORDS SOLO, SOLO a string: default "--q 1 --in-process 1"), then the sweep (LAUNCH SWEEP DIR/sweep.json ARGS; LAUNCH and ARGS strings);
# passes if every member's printed losses are the solo run's and its export the same bytes, and the stopped member is
# named (exit status 1) while the others finish.
separate_arguments(base UNIX_COMMAND "${BASE}")
separate_arguments(args UNIX_COMMAND "${ARGS}")
separate_arguments(launch UNIX_COMMAND "${LAUNCH}")
if(NOT SOLO)
  set(SOLO "--q 1 --in-process 1")
endif()
separate_arguments(solo UNIX_COMMAND "${SOLO}")
string(REPLACE "," ";" lrs "${LRS}")
string(REPLACE "," ";" seeds "${SEEDS}")
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")

# The losses a run printed for a member: "step N  loss X" lines (after "[NAME] " in a sweep's output).
function(losses_of text prefix out)
  string(REGEX MATCHALL "${prefix}step +[0-9]+  loss [0-9.]+" lines "${text}")
  list(TRANSFORM lines REPLACE "^.*step" "step")
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

set(entries "")
set(names "")
foreach(lr IN LISTS lrs)
  foreach(seed IN LISTS seeds)
    set(name "lr${lr}-s${seed}")
    list(APPEND names ${name})
    execute_process(COMMAND ${TRAIN} ${base} --lr ${lr} --seed ${seed} ${solo}
                            --export ${DIR}/solo_${name}.bin
                    RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "member ${name} alone: exit ${rc}\n${text}${err}")
    endif()
    losses_of("${text}" "\n" solo_${name})
    list(APPEND entries "{\"name\": \"${name}\", \"options\": \"${BASE} --lr ${lr} --seed ${seed} --export ${DIR}/sweep_${name}.bin\"}")
  endforeach()
endforeach()
set(expected_rc 0)
if(STOPPED_MEMBER)
  string(REPLACE "|" ";" stopped "${STOPPED_MEMBER}")
  list(GET stopped 0 stopped_name)
  list(GET stopped 1 stopped_words)
  list(APPEND entries "{\"name\": \"${stopped_name}\", \"options\": \"${stopped_words}\"}")
  set(expected_rc 1)
endif()
list(JOIN entries ",\n  " members)
file(WRITE ${DIR}/sweep.json "{\"members\": [\n  ${members}\n]}\n")

execute_process(COMMAND ${launch} ${SWEEP} ${DIR}/sweep.json ${args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
if(NOT rc EQUAL expected_rc)
  message(FATAL_ERROR "the sweep exited ${rc}, not ${expected_rc}:\n${text}${err}")
endif()
foreach(name IN LISTS names)
  losses_of("${text}" "\\[${name}\\] " swept)
  if(NOT swept STREQUAL solo_${name} OR swept STREQUAL "")
    message(FATAL_ERROR "member ${name}: the sweep printed '${swept}', alone '${solo_${name}}'\n${text}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${DIR}/sweep_${name}.bin ${DIR}/solo_${name}.bin
                  RESULT_VARIABLE differ)
  if(differ)
    message(FATAL_ERROR "member ${name}: its export differs from its solo run's\n${text}")
  endif()
endforeach()
if(STOPPED_MEMBER AND NOT text MATCHES "\\[${stopped_name}\\] stopped: step 1: the training loss is")
  message(FATAL_ERROR "member ${stopped_name} was not named as stopped:\n${text}")
endif()
# Stopped at step 1, before any interval ended: no last loss ("-", not 0.0000) and no step trained in the table.
if(STOPPED_MEMBER AND NOT text MATCHES "\n +[0-9]+ +${stopped_name} +[^ ]+ +- +0/[0-9]+ +stopped: ")
  message(FATAL_ERROR "the table's row of member ${stopped_name} does not show it stopped before any loss:\n${text}")
endif()
list(LENGTH names count)
message(STATUS "${count} members: the losses and exports of their runs alone")

# run(COMMAND...): one step of a `cmake -P` test script, run in ${WORK};
# a failure stops the script with the command, its status and its output.
# The step's stdout is printed and left in `last_out` for checks.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  WORKING_DIRECTORY ${WORK})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message("${out}")
  set(last_out "${out}" PARENT_SCOPE)
endfunction()

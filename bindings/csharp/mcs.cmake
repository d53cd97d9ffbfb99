# cmake -P: runs mcs over the generated and hand-written C# sources (their
# names depend on vkattn.i, hence the glob at build time).
#   -DMCS -DGLOBS (pattern, optional) -DFILES (a|b|...) -DREFS (a|b|..., optional)
#   -DTARGET (library|exe) -DOUT
set(sources)
if(GLOBS)
  file(GLOB sources ${GLOBS})
endif()
string(REPLACE "|" ";" files "${FILES}")
list(APPEND sources ${files})
set(refs)
if(REFS)
  string(REPLACE "|" ";" ref_list "${REFS}")
  foreach(r ${ref_list})
    list(APPEND refs -r:${r})
  endforeach()
endif()
execute_process(COMMAND ${MCS} -nologo -warnaserror+ -nowarn:1591 -target:${TARGET} -out:${OUT}
  ${refs} ${sources} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcs failed")
endif()

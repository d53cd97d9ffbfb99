# The API reference (Doxygen, Debian's doxygen): docs/Doxyfile.in configured
# into <build>/docs/Doxyfile, input include/vkattn/vkattn.h and docs/guide/.
#
#   cmake --build build --target docs      -> build/docs/html/index.html
#
# With VKATTN_BUILD_TESTS, the ctest docs.no_undocumented (label unit) runs
# doxygen and fails when its warning log is not empty: an undocumented public
# function, struct field, enum value, macro or typedef, or a broken reference.
# Without doxygen there is no docs target and no test.
find_package(Doxygen)
if(NOT DOXYGEN_FOUND)
  message(STATUS "Doxygen not found: no docs target (apt-get install doxygen)")
  return()
endif()

set(VKATTN_DOCS_DIR ${CMAKE_CURRENT_BINARY_DIR}/docs)
set(VKATTN_DOCS_WARN_LOG ${VKATTN_DOCS_DIR}/doxygen-warnings.log)
set(VKATTN_DOXYFILE ${VKATTN_DOCS_DIR}/Doxyfile)
file(MAKE_DIRECTORY ${VKATTN_DOCS_DIR})
configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${VKATTN_DOXYFILE} @ONLY)

set(vkattn_docs_check
    ${CMAKE_COMMAND} -DDOXYGEN=${DOXYGEN_EXECUTABLE} -DDOXYFILE=${VKATTN_DOXYFILE}
    -DWARN_LOG=${VKATTN_DOCS_WARN_LOG} -DOUTPUT_DIR=${VKATTN_DOCS_DIR}
    -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include)
set(vkattn_docs_script ${PROJECT_SOURCE_DIR}/cmake/check_docs.cmake)
# Not part of ALL. Prints the warnings, if any, without failing the build.
add_custom_target(docs
  COMMAND ${vkattn_docs_check} -DSTRICT=OFF -P ${vkattn_docs_script}
  COMMENT "Doxygen: API reference in ${VKATTN_DOCS_DIR}/html"
  VERBATIM)

if(VKATTN_BUILD_TESTS)
  enable_testing()
  add_test(NAME docs.no_undocumented
           COMMAND ${vkattn_docs_check} -DSTRICT=ON -P ${vkattn_docs_script})
  set_tests_properties(docs.no_undocumented PROPERTIES LABELS unit TIMEOUT 120)
endif()

# ctest bindings.python_pip: a fresh venv (NumPy from the system), pip
# install of the build tree's package offline, then the example with the
# venv's interpreter from outside the tree, without PYTHONPATH.
file(REMOVE_RECURSE ${WORK})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  WORKING_DIRECTORY ${WORK})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message("${out}")
endfunction()
file(MAKE_DIRECTORY ${WORK})
unset(ENV{PYTHONPATH})
set(ENV{PIP_NO_INDEX} 1)
set(ENV{PIP_DISABLE_PIP_VERSION_CHECK} 1)
run(${PYTHON} -m venv --system-site-packages ${WORK}/venv)
run(${WORK}/venv/bin/pip install -q --no-index --no-build-isolation ${PKG})
run(${WORK}/venv/bin/python -c "import vkattn, os; p = vkattn.__file__; assert '${WORK}/venv' in p, p; print('imported', p)")
run(${WORK}/venv/bin/python ${EXAMPLE})

# ctest bindings.python_pip: a fresh venv (NumPy from the system), pip
# install of the build tree's package offline, then the example with the
# venv's interpreter from outside the tree, without PYTHONPATH.
file(REMOVE_RECURSE ${WORK})
include(${CMAKE_CURRENT_LIST_DIR}/../run_step.cmake)
file(MAKE_DIRECTORY ${WORK})
unset(ENV{PYTHONPATH})
set(ENV{PIP_NO_INDEX} 1)
set(ENV{PIP_DISABLE_PIP_VERSION_CHECK} 1)
run(${PYTHON} -m venv --system-site-packages ${WORK}/venv)
run(${WORK}/venv/bin/pip install -q --no-index --no-build-isolation ${PKG})
run(${WORK}/venv/bin/python -c "import vkattn, os; p = vkattn.__file__; assert '${WORK}/venv' in p, p; print('imported', p)")
run(${WORK}/venv/bin/python ${EXAMPLE})

# Python: the package vkattn assembled in build/bindings/python/vkattn
# (hand-written __init__.py + SWIG's vkattnraw.py and its extension _vkattnraw),
# importable with PYTHONPATH=build/bindings/python. Included by
# ../CMakeLists.txt when VKATTN_BINDING_PYTHON is on.
#
# Debian's interpreter first: it is the one with python3-numpy and
# python3-pytest (another python3 on PATH, e.g. pyenv's, may have neither).
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module NumPy)

set(PY_PKG ${B}/python/vkattn)
swig_add_library(vkattn_python TYPE MODULE LANGUAGE python SOURCES ${VKATTN_I}
  OUTPUT_DIR ${PY_PKG} OUTFILE_DIR ${B}/python/wrap)
set_property(TARGET vkattn_python PROPERTY SWIG_COMPILE_OPTIONS ${VKATTN_SWIG_COMMON})
# The extension is _vkattnraw.<abi>.so beside the generated vkattnraw.py.
# Run paths: $ORIGIN first (the copy of libvkattn a pip-installed package
# carries), then the build tree (added by CMake); installed, the library of
# the prefix (<prefix>/lib/python3.X/dist-packages/vkattn -> <prefix>/lib).
set_target_properties(vkattn_python PROPERTIES
  OUTPUT_NAME _vkattnraw PREFIX "" SUFFIX ".${Python3_SOABI}.so"
  LIBRARY_OUTPUT_DIRECTORY ${PY_PKG}
  BUILD_RPATH "\$ORIGIN"
  INSTALL_RPATH "\$ORIGIN/../../..")
target_link_libraries(vkattn_python PRIVATE Python3::Module)
vkattn_binding_target_setup(vkattn_python)

file(GLOB VKATTN_PY_HAND CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/python/vkattn/*.py)
set(VKATTN_PY_COPIES)
foreach(f ${VKATTN_PY_HAND})
  get_filename_component(n ${f} NAME)
  add_custom_command(OUTPUT ${PY_PKG}/${n}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${f} ${PY_PKG}/${n}
    DEPENDS ${f} VERBATIM)
  list(APPEND VKATTN_PY_COPIES ${PY_PKG}/${n})
endforeach()
# __version__ (the CMake project version), generated into the package.
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/python/_version.py.in ${PY_PKG}/_version.py @ONLY)
# pip: pyproject.toml beside the package, and the library inside it.
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/python/pyproject.toml.in ${B}/python/pyproject.toml @ONLY)
add_custom_command(OUTPUT ${PY_PKG}/libvkattn.so.${PROJECT_VERSION_MAJOR}
  COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:vkattn> ${PY_PKG}/libvkattn.so.${PROJECT_VERSION_MAJOR}
  DEPENDS vkattn VERBATIM)
list(APPEND VKATTN_PY_COPIES ${PY_PKG}/libvkattn.so.${PROJECT_VERSION_MAJOR})
# The GLSL compiler of attention variants beside it (core/glsl_compiler.cpp
# looks in the folder libvkattn was loaded from).
if(TARGET vkattn_shaderc)
  add_custom_command(OUTPUT ${PY_PKG}/libvkattn_shaderc.so
    COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:vkattn_shaderc> ${PY_PKG}/libvkattn_shaderc.so
    DEPENDS vkattn_shaderc VERBATIM)
  list(APPEND VKATTN_PY_COPIES ${PY_PKG}/libvkattn_shaderc.so)
endif()
add_custom_target(vkattn_python_package ALL DEPENDS ${VKATTN_PY_COPIES})

# cmake --install: <prefix>/lib/python3.X/dist-packages/vkattn, where
# Debian's python3 looks for /usr/local (so after `cmake --install build`,
# `python3 -c "import vkattn"` works); PYTHONPATH for other prefixes.
set(VKATTN_PY_DEST
  ${CMAKE_INSTALL_LIBDIR}/python3.${Python3_VERSION_MINOR}/dist-packages/vkattn)
install(TARGETS vkattn_python LIBRARY DESTINATION ${VKATTN_PY_DEST} COMPONENT python)
install(FILES ${VKATTN_PY_HAND} ${PY_PKG}/vkattnraw.py ${PY_PKG}/_version.py DESTINATION ${VKATTN_PY_DEST}
  COMPONENT python)
add_dependencies(vkattn_python vkattn_python_package)

# What a script needs to import the package from the build tree.
set(VKATTN_PYTHON_ENV "PYTHONPATH=${B}/python" "PYTHONDONTWRITEBYTECODE=1")

if(VKATTN_BUILD_TESTS)
  # pip install of the build tree into a fresh venv, offline; then the
  # example runs from the venv alone (no PYTHONPATH, cwd outside the tree).
  add_test(NAME bindings.python_pip
    COMMAND ${CMAKE_COMMAND} -DPYTHON=${Python3_EXECUTABLE} -DPKG=${B}/python
      -DWORK=${B}/python/pip-test -DEXAMPLE=${PROJECT_SOURCE_DIR}/examples/python/paged_decode.py
      -P ${CMAKE_CURRENT_SOURCE_DIR}/python/pip_test.cmake)
  set_tests_properties(bindings.python_pip PROPERTIES
    LABELS bindings ENVIRONMENT "${VKATTN_BINDINGS_ENV}" TIMEOUT 900
    PASS_REGULAR_EXPRESSION "last output norm: [0-9]")
  add_test(NAME bindings.python
    COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
      ${CMAKE_CURRENT_SOURCE_DIR}/python/test)
  set_tests_properties(bindings.python PROPERTIES
    LABELS bindings ENVIRONMENT "${VKATTN_BINDINGS_ENV};${VKATTN_PYTHON_ENV}" TIMEOUT 900)
  # Against Debian's PyTorch (python3-torch, 1.13): not in CI (it pulls in
  # hundreds of packages), so labelled slow too; ctest -L torch after
  # apt-get install python3-torch.
  add_test(NAME bindings.python_torch
    COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
      ${CMAKE_CURRENT_SOURCE_DIR}/python/test_torch)
  set_tests_properties(bindings.python_torch PROPERTIES
    LABELS "torch;slow" ENVIRONMENT "${VKATTN_BINDINGS_ENV};${VKATTN_PYTHON_ENV}" TIMEOUT 900)
endif()

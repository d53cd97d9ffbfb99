# vkattn_compile_shaders(<cpp_var> <spv_var> name...)
# Compiles shaders/<name>.comp with glslangValidator (no optimizer: spirv-opt
# on big unrolled shaders can exhaust memory, see LAVAPIPE.md) into
# <build>/shaders/<name>.spv, with a depfile so edits to included .glsl files
# rebuild, then embeds every module into one generated .cpp. Names listed
# in VKATTN_COOPMAT_SHADERS are compiled with ${VKATTN_GLSLANG_COOPMAT} (a
# glslang that knows GL_KHR_cooperative_matrix) and checked with
# ${VKATTN_SPIRV_VAL_COOPMAT} (both command lists).
function(vkattn_compile_shaders cpp_var spv_var)
  set(spv_files)
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/shaders)
  file(MAKE_DIRECTORY ${out_dir})
  foreach(name IN LISTS ARGN)
    set(src ${CMAKE_CURRENT_SOURCE_DIR}/shaders/${name}.comp)
    set(spv ${out_dir}/${name}.spv)
    if(name IN_LIST VKATTN_COOPMAT_SHADERS)
      set(compiler ${VKATTN_GLSLANG_COOPMAT})
      set(validate COMMAND ${VKATTN_SPIRV_VAL_COOPMAT} --target-env vulkan1.2 ${spv})
    else()
      set(compiler ${GLSLANG_VALIDATOR})
      set(validate)
    endif()
    add_custom_command(
      OUTPUT ${spv}
      COMMAND ${compiler} -V --target-env vulkan1.2
              -I${CMAKE_CURRENT_SOURCE_DIR}/shaders/include
              --depfile ${spv}.d -o ${spv} ${src}
      ${validate}
      DEPENDS ${src}
      DEPFILE ${spv}.d
      COMMENT "glslang ${name}.comp"
      VERBATIM)
    list(APPEND spv_files ${spv})
  endforeach()
  set(cpp ${out_dir}/embedded_shaders.cpp)
  add_custom_command(
    OUTPUT ${cpp}
    COMMAND ${CMAKE_COMMAND} -DOUT=${cpp} "-DNAMES=${ARGN}" -DDIR=${out_dir}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
    DEPENDS ${spv_files} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
    COMMENT "embedding SPIR-V"
    VERBATIM)
  set(${cpp_var} ${cpp} PARENT_SCOPE)
  set(${spv_var} ${spv_files} PARENT_SCOPE)
endfunction()

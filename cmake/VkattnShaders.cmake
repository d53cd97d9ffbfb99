# vkattn_compile_shaders(<cpp_var> <spv_var> name...)
# Compiles shaders/<name>.comp with glslangValidator (no optimizer: spirv-opt
# on big unrolled shaders can exhaust memory, see LAVAPIPE.md) into
# <build>/shaders/<name>.spv, with a depfile so edits to included .glsl files
# rebuild, then embeds every module into one generated .cpp. Names listed
# in VKATTN_COOPMAT_SHADERS are compiled with ${VKATTN_GLSLANG_COOPMAT} (a
# glslang that knows GL_KHR_cooperative_matrix) and checked with
# ${VKATTN_SPIRV_VAL_COOPMAT} (both command lists).
#
# Every name listed in VKATTN_SOFT_F16_SHADERS is compiled a second time
# with -DVKATTN_SOFT_F16 into <name>_soft_f16 (shaders/include/dtype.glsl:
# f16 -> f32 by integer arithmetic, for drivers whose compiler aborts on
# the conversion; core/device.cpp picks the variant per device).
function(vkattn_compile_shaders cpp_var spv_var)
  set(spv_files)
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/shaders)
  file(MAKE_DIRECTORY ${out_dir})
  set(all_names)
  foreach(name IN LISTS ARGN)
    list(APPEND all_names ${name})
    if(name IN_LIST VKATTN_SOFT_F16_SHADERS)
      list(APPEND all_names ${name}_soft_f16)
    endif()
  endforeach()
  foreach(name IN LISTS all_names)
    set(defines)
    set(base ${name})
    if(name MATCHES "^(.*)_soft_f16$")
      set(base ${CMAKE_MATCH_1})
      set(defines -DVKATTN_SOFT_F16=1)
    endif()
    set(src ${CMAKE_CURRENT_SOURCE_DIR}/shaders/${base}.comp)
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
      COMMAND ${compiler} -V --target-env vulkan1.2 ${defines}
              -I${CMAKE_CURRENT_SOURCE_DIR}/shaders/include
              --depfile ${spv}.d -o ${spv} ${src}
      ${validate}
      DEPENDS ${src}
      DEPFILE ${spv}.d
      COMMENT "glslang ${name}"
      VERBATIM)
    list(APPEND spv_files ${spv})
  endforeach()
  set(cpp ${out_dir}/embedded_shaders.cpp)
  add_custom_command(
    OUTPUT ${cpp}
    COMMAND ${CMAKE_COMMAND} -DOUT=${cpp} "-DNAMES=${all_names}" -DDIR=${out_dir}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
    DEPENDS ${spv_files} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
    COMMENT "embedding SPIR-V"
    VERBATIM)
  # The attention shaders' GLSL and every include, as text (attention
  # variants: user functions spliced in at run time).
  file(GLOB glsl_files CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_SOURCE_DIR}/shaders/attention_*.comp
       ${CMAKE_CURRENT_SOURCE_DIR}/shaders/include/*.glsl)
  list(SORT glsl_files)
  set(glsl_cpp ${out_dir}/embedded_glsl.cpp)
  add_custom_command(
    OUTPUT ${glsl_cpp}
    COMMAND ${CMAKE_COMMAND} -DOUT=${glsl_cpp} "-DFILES=${glsl_files}"
            -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_glsl.cmake
    DEPENDS ${glsl_files} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_glsl.cmake
    COMMENT "embedding GLSL"
    VERBATIM)
  set(${cpp_var} ${cpp} ${glsl_cpp} PARENT_SCOPE)
  set(${spv_var} ${spv_files} PARENT_SCOPE)
endfunction()

#version 450
// Family `tiled` in f16 arithmetic (devices with shaderFloat16;
// VKATTN_FORCE_F16_MATH / VKATTN_DISABLE_F16_MATH): row sums by subgroup
// shuffles. Body: include/attention_tiled.glsl.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_GOOGLE_include_directive : require
#define TILED_SUBGROUP_OPS 1
#define TILED_F16 1
#include "attention_tiled.glsl"

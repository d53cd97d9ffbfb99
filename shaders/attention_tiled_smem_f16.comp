#version 450
// Family `tiled` in f16 arithmetic, row sums through shared memory.
// Body: include/attention_tiled.glsl.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_GOOGLE_include_directive : require
#define TILED_SUBGROUP_OPS 0
#define TILED_F16 1
#include "attention_tiled.glsl"

#version 450
// Family `tiled` without subgroup operations: a row's dot products are
// summed through shared memory (VKATTN_DISABLE_SUBGROUP_OPS=1, or a device
// without subgroup shuffles). Body: include/attention_tiled.glsl.
#extension GL_GOOGLE_include_directive : require
#define TILED_SUBGROUP_OPS 0
#include "attention_tiled.glsl"

#version 450
// Family `tiled` (src/ops/attention/families/tiled.cpp): the kernel body is
// include/attention_tiled.glsl; this module sums a row's dot products with
// subgroup shuffles. attention_tiled_smem.comp is the same kernel summing
// through shared memory, for devices (or drivers) without working shuffles.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_GOOGLE_include_directive : require
#define TILED_SUBGROUP_OPS 1
#include "attention_tiled.glsl"

#version 450
// Family `decode` (src/ops/attention/families/decode.cpp): flash-decoding
// for tiles of a few query tokens; the kernel body is
// include/attention_decode.glsl. This module sums a key's partial dot
// products with subgroup shuffles; attention_decode_smem.comp is the same
// kernel summing through shared memory.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_GOOGLE_include_directive : require
#define DECODE_SUBGROUP_OPS 1
#include "attention_decode.glsl"

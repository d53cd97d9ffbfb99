#version 450
// Family `decode` without subgroup operations: a key's partial dot products
// are summed through shared memory (VKATTN_DISABLE_SUBGROUP_OPS=1, or a
// device without subgroup shuffles or with subgroups narrower than a key
// row's lanes). Body: include/attention_decode.glsl.
#extension GL_GOOGLE_include_directive : require
#define DECODE_SUBGROUP_OPS 0
#include "attention_decode.glsl"

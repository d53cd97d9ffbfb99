#version 450
// Benchmark calibration: read bandwidth of f16 data, eight loads in flight
// per invocation folded into a checksum (the host checks it before it
// believes the time). KIND picks the load:
//   0: storage-buffer uvec4 words, unpacked with unpackHalf2x16;
//   1: the same words as storage-buffer vec4 of f32 (no unpacking);
//   2: texel fetches (rgba32ui) of the words, unpacked (attention_fwd's path).
// SPAN picks the pattern:
//   1: invocation i reads the contiguous span [i * span, (i + 1) * span) of
//      words, as attention_fwd.comp's decode lanes read K/V rows;
//   0: workgroup g reads a contiguous span, its lanes on adjacent words
//      (the coalesced pattern GPUs want).
// The host reports each kind (best pattern and workgroup) and takes the
// f16 storage-buffer figure as the read bound (examples/bench/bench_peaks.cpp).
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "dtype.glsl"  // (unpackHalf2x16 of the _soft_f16 variant)
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint KIND = 0;
layout(constant_id = 2) const uint SPAN = 1;
layout(std430, binding = 0) restrict readonly buffer Src { uvec4 src_w[]; };
layout(binding = 1) uniform usamplerBuffer src_t;
layout(std430, binding = 2) writeonly buffer Out { float out_f[]; };
layout(push_constant) uniform Push { uint span; uint n_inv; } pc;

vec4 halves(uvec4 w) {
  return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)) + vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
}

void main() {
  uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (id >= pc.n_inv) return;
  vec4 acc[8];
  [[unroll]] for (uint j = 0u; j < 8u; ++j) acc[j] = vec4(0.0);
  const uint wg = gl_WorkGroupSize.x;
  const uint base = SPAN != 0u ? id * pc.span : (id - id % wg) * pc.span + id % wg;
  const uint step = SPAN != 0u ? 1u : wg;
  for (uint i = 0u; i < pc.span; i += 8u) {
    [[unroll]] for (uint j = 0u; j < 8u; ++j) {
      uint w = base + (i + j) * step;
      if (KIND == 0u) acc[j] += halves(src_w[w]);
      else if (KIND == 1u) acc[j] += uintBitsToFloat(src_w[w]);
      else acc[j] += halves(texelFetch(src_t, int(w)));
    }
  }
  vec4 s = vec4(0.0);
  [[unroll]] for (uint j = 0u; j < 8u; ++j) s += acc[j];
  out_f[id] = s.x + s.y + s.z + s.w;
}

#version 450
// Benchmark calibration: read bandwidth through 16-byte texel fetches (the
// path attention_fwd.comp reads K/V through). Invocation i sums texels
// i, i + n_inv, i + 2 n_inv, ... and stores the sum.
layout(local_size_x = 64) in;
layout(binding = 0) uniform usamplerBuffer src;
layout(std430, binding = 1) writeonly buffer Out { uint out_w[]; };
layout(push_constant) uniform Push { uint texels; uint n_inv; } pc;

void main() {
  uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (id >= pc.n_inv) return;
  uvec4 s = uvec4(0u);
  for (uint t = id; t < pc.texels; t += pc.n_inv) s += texelFetch(src, int(t));
  out_w[id] = s.x ^ s.y ^ s.z ^ s.w;
}

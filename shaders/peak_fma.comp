#version 450
// Benchmark calibration: f32 FMA throughput. Each invocation runs `iters`
// rounds of 16 independent vec4 FMAs (unrolled) and stores a checksum.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Out { float out_f[]; };
layout(push_constant) uniform Push { uint iters; float seed; } pc;

void main() {
  uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  vec4 acc[16];
  [[unroll]] for (uint i = 0u; i < 16u; ++i) acc[i] = vec4(float(id + i) * 1e-6);
  vec4 a = vec4(pc.seed), b = vec4(0.999);
  for (uint n = 0u; n < pc.iters; ++n) {
    [[unroll]] for (uint i = 0u; i < 16u; ++i) acc[i] = fma(acc[i], b, a);
  }
  vec4 s = vec4(0.0);
  [[unroll]] for (uint i = 0u; i < 16u; ++i) s += acc[i];
  out_f[id] = s.x + s.y + s.z + s.w;
}

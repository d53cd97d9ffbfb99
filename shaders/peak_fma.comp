#version 450
// Benchmark calibration: f32 FMA throughput. Each invocation runs ACC
// independent scalar FMA chains (lavapipe runs 8 invocations per SIMD
// register, so each chain is one register), UNROLL rounds unrolled per
// iteration of the one rolled loop, `iters` iterations, and stores the sum
// of its chains, which the host checks against the closed form before it
// believes the time (examples/bench/bench_peaks.cpp). The host tries
// several shapes and keeps the fastest.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ACC = 8;
layout(constant_id = 2) const uint UNROLL = 8;
layout(std430, binding = 0) writeonly buffer Out { float out_f[]; };
layout(push_constant) uniform Push { uint iters; float seed; } pc;

void main() {
  uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  float acc[ACC];
  [[unroll]] for (uint i = 0u; i < ACC; ++i) acc[i] = float(id + i) * 1e-6;
  const float a = pc.seed, b = 0.999;
  for (uint n = 0u; n < pc.iters; ++n) {
    [[unroll]] for (uint r = 0u; r < UNROLL; ++r) {
      [[unroll]] for (uint i = 0u; i < ACC; ++i) acc[i] = fma(acc[i], b, a);
    }
  }
  float s = 0.0;
  [[unroll]] for (uint i = 0u; i < ACC; ++i) s += acc[i];
  out_f[id] = s;
}

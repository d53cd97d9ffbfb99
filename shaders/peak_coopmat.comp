#version 450
// Benchmark calibration: f16 cooperative-matrix throughput with f32
// accumulation (VK_KHR_cooperative_matrix; the tensor cores vkattn's coopmat
// family runs on), with operands streamed from shared memory as a kernel
// streams them. Each subgroup keeps NACC accumulators of TM x TN; each
// round loads one A (TM x TK) and NACC B (TK x TN) fragments from shared
// memory at offsets that move with the loop counter, and runs one
// coopMatMulAdd per accumulator. Operands a compiler could prove loop
// invariant get folded: lavapipe 26.1's LLVM turned a register-only version
// into 1276 GFLOP/s on cores whose FMA peak is 142. Every operand element
// is alpha, so every element of the stored sum of the accumulators is
// NACC * iters * UNROLL * TK * alpha^2, exact in f32 for the host's
// choices, which it checks before it believes the time
// (examples/bench/bench_peaks.cpp). Built only with -DVKATTN_COOPMAT=ON.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint TM = 16;
layout(constant_id = 2) const uint TN = 16;
layout(constant_id = 3) const uint TK = 16;
layout(constant_id = 4) const uint NACC = 4;
layout(constant_id = 5) const uint UNROLL = 4;
layout(std430, binding = 0) writeonly buffer Out { float out_f[]; };
layout(push_constant) uniform Push { uint iters; float alpha; } pc;

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>

// 4 A and 8 B fragments, rows of f16vec4 (TK and TN are multiples of 8:
// every fragment and row starts 16-byte aligned).
const uint AF = TM * TK / 4u, BF = TK * TN / 4u;
shared f16vec4 sh_a[4u * AF];
shared f16vec4 sh_b[8u * BF];

void main() {
  const uint sg = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * gl_NumSubgroups +
                  gl_SubgroupID;
  const f16vec4 v = f16vec4(float16_t(pc.alpha));
  for (uint x = gl_LocalInvocationID.x; x < 4u * AF; x += WG) sh_a[x] = v;
  for (uint x = gl_LocalInvocationID.x; x < 8u * BF; x += WG) sh_b[x] = v;
  memoryBarrierShared();
  barrier();
  MAT_C acc[NACC];
  [[unroll]] for (uint i = 0u; i < NACC; ++i) acc[i] = MAT_C(0.0);
  for (uint n = 0u; n < pc.iters; ++n) {
    [[unroll]] for (uint r = 0u; r < UNROLL; ++r) {
      MAT_A a;
      coopMatLoad(a, sh_a, ((n + r) & 3u) * AF, TK / 4u, gl_CooperativeMatrixLayoutRowMajor);
      [[unroll]] for (uint i = 0u; i < NACC; ++i) {
        MAT_B b;
        coopMatLoad(b, sh_b, ((n + r + i) & 7u) * BF, TN / 4u, gl_CooperativeMatrixLayoutRowMajor);
        acc[i] = coopMatMulAdd(a, b, acc[i]);
      }
    }
  }
  [[unroll]] for (uint i = 1u; i < NACC; ++i) acc[0] = acc[0] + acc[i];
  coopMatStore(acc[0], out_f, sg * TM * TN, TN, gl_CooperativeMatrixLayoutRowMajor);
}

#version 450
// The test engine's own kernel (tests/test_external_device.cpp): x[i] *=
// factor over a whole buffer, one invocation per element.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X {
  float x[];
};
layout(push_constant) uniform Push {
  uint n;
  float factor;
}
pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.n) x[i] *= pc.factor;
}

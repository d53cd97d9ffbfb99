// lavapipe's loop cap, the one constant every kernel's work bound derives
// from. Mesa 22.3's lavapipe (Debian 12) silently ends all loops of a shader
// invocation once that invocation has run kLoopBudget loop iterations in
// total, across every loop of the shader (wrong results, no error). A loop
// that is entered once and runs n iterations costs n + 1: its exit test
// runs the loop body's header once more. Newer Mesa and GPUs have no cap;
// the bounds below cost nothing measurable there (work is split into more
// items, not made slower).
//
// Each kernel's host side computes the worst-case cost of one invocation
// from the loops in its shader (the comments next to each bound name the
// loops they mirror) and keeps it within kLoopBudget - kLoopSlack.
#pragma once

#include <cstdint>

namespace vkattn {

constexpr uint64_t kLoopBudget = 65535;
// Head room for loops a driver's compiler keeps rolled although the shader
// asks to unroll them (none seen on lavapipe; a guard, not a measurement).
constexpr uint64_t kLoopSlack = 256;
constexpr uint64_t kLoopUsable = kLoopBudget - kLoopSlack;

// Cost of one execution of a loop of n iterations.
constexpr uint64_t loop_cost(uint64_t n) {
  return n + 1;
}

}  // namespace vkattn

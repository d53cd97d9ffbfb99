// Integer division rounded down or up, for a positive divisor and a
// dividend of either sign (C++ division truncates toward zero).
#pragma once

namespace vkattn {

template <typename I>
I floor_div(I a, I b) {  // b > 0
  const I q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

template <typename I>
I ceil_div(I a, I b) {  // b > 0
  const I q = a / b;
  return (a % b != 0 && a > 0) ? q + 1 : q;
}

}  // namespace vkattn

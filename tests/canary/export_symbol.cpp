// Canary for tests/abi/check_exports.sh (tools/canaries.sh): a library
// that exports the header's functions plus a C++ symbol; the check must
// name the C++ symbol and fail.
#include "vkattn/vkattn.h"

namespace vkattn {
__attribute__((visibility("default"))) int leaked_cpp_function(int x) {
  return x + 1;
}
}  // namespace vkattn

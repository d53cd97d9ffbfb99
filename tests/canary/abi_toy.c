/* Canary for tools/abi-check.sh (tools/canaries.sh): the same toy library
 * built against abi_toy_v1.h (the baseline) and abi_toy_v2.h (a field's
 * type changed in place); the check must fail on v2. */
#include "abi_toy.h"

int toy_run(const toy_desc* d) {
  return (int)d->a;
}

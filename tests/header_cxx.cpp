// The public header compiles as C++ with every warning an error.
#include "vkattn/vkattn.h"

int vkattn_header_cxx_check();
int vkattn_header_cxx_check() {
  vkattn_context_desc d;
  vkattn_context_desc_init(&d);
  return static_cast<int>(sizeof(d)) + static_cast<int>(VKATTN_F32);
}

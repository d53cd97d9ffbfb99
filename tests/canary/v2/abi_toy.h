#include <stdint.h>
typedef struct toy_desc {
  uint32_t struct_size;
  uint32_t a;
  double b; /* changed in place: not allowed by the growth rule */
} toy_desc;
__attribute__((visibility("default"))) int toy_run(const toy_desc* d);

// The C side of vkattn_log.go: vkattn's log callback calls the Go export.
// The two declarations are the header's (vkattn_log_level is an int).
#include "_cgo_export.h"

typedef void (*vkattnx_log_fn)(int level, const char* message, void* user);
extern void vkattn_set_log_callback(vkattnx_log_fn fn, void* user);

static void vkattnx_go_log_callback(int level, const char* message, void* user) {
  (void)user;
  vkattnxGoLog(level, (char*)message);
}

void vkattnxGoRouteLog(int on) {
  vkattn_set_log_callback(on ? vkattnx_go_log_callback : 0, 0);
}

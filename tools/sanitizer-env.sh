# Sourced by tools/checks.sh and tools/canaries.sh: the options of the
# sanitizer runs. $1: the ASan build directory (for the preloaded shim).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# Leaks are reported at exit; the shim keeps the Vulkan driver and layers
# mapped until then so that tests/sanitizers/lsan.supp can name them.
# intercept_tls_get_addr=0: clang 14's runtime (LLVM <= 16, GCC <= 13)
# takes a dynamic TLS block that happens to start 16 bytes past a page
# boundary for a pre-2.25 glibc header and reads the two words before it
# as a range; LeakSanitizer's tracer then dies on that range ("Tracer
# caught signal 11", no leak named). Mesa, LLVM and the layers are
# dlopen'd libraries with TLS, so any leak check (libFuzzer runs one
# after inputs that grow the heap) could hit it; CI's fuzz step did once.
asan_env() {
  env LD_PRELOAD="$(cd "$1" && pwd)/tests/libvkattn_keep_loaded.so" \
    ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:abort_on_error=0:intercept_tls_get_addr=0:${ASAN_OPTIONS:-}" \
    LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" "${@:2}"
}
tsan_env() {
  env TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp" "$@"
}
valgrind_memcheck() {
  valgrind --error-exitcode=9 --leak-check=full --show-leak-kinds=definite \
    --errors-for-leak-kinds=definite --suppressions="$root/tests/sanitizers/valgrind.supp" \
    --num-callers=30 "$@"
}

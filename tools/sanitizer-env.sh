# Sourced by tools/checks.sh and tools/canaries.sh: the options of the
# sanitizer runs. $1: the ASan build directory (for the preloaded shim).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# Leaks are reported at exit; the shim keeps the Vulkan driver and layers
# mapped until then so that tests/sanitizers/lsan.supp can name them.
asan_env() {
  env LD_PRELOAD="$(cd "$1" && pwd)/tests/libvkattn_keep_loaded.so" \
    ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:abort_on_error=0:${ASAN_OPTIONS:-}" \
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

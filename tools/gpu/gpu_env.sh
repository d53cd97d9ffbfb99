# Sourced by tools/gpu/run_checks.sh and tools/gpu/campaign.sh, from the
# project root on the GPU machine: points the loader at the packages
# ../shared/gpu/pack.sh and tools/gpu/pack_extra.sh put in .gpu/debs
# (unpacked into .gpu/root, never into /). Without .gpu/debs (the Debian 12
# machine, a dry run on lavapipe) the system's loader and driver are used
# as they are. What an H100 (driver 580) needed beyond ../shared/gpu/run.sh:
#  - the driver's own folder on LD_LIBRARY_PATH (its manifest names
#    libGLX_nvidia.so.0 by file name only) and glvnd's libraries;
#  - GLIBC_TUNABLES=glibc.rtld.optional_static_tls: libnvidia-tls, loaded
#    again by every new instance, otherwise fails "cannot allocate memory in
#    static TLS block" when threads create contexts at once;
#  - LD_PRELOAD of libEGL and libGLdispatch: the driver loads them and each
#    instance's teardown unloaded them while other threads still had their
#    thread-exit destructors (SIGSEGV at thread exit in libEGL, test_threads).
root=$(pwd)
gpu=$root/.gpu
build=${VKATTN_BUILD:-build}
case "$build" in /*) build_abs=$build ;; *) build_abs=$root/$build ;; esac
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# VKATTN_GPU_PACKAGES=0: the system's loader even where .gpu/debs exists
# (the campaign's dry run on lavapipe).
if [ -d "$gpu/debs" ] && [ "${VKATTN_GPU_PACKAGES:-1}" != 0 ]; then
  [ -d "$gpu/root" ] || {
    mkdir -p "$gpu/root"
    for f in "$gpu"/debs/*.deb; do dpkg -x "$f" "$gpu/root"; done
  }
  lib=$gpu/root/usr/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH="$lib:$build_abs/src:$build_abs:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
  export VK_LAYER_PATH=$gpu/root/usr/share/vulkan/explicit_layer.d
  for m in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$m" ] && { export VK_DRIVER_FILES=$m; break; }
  done
  export GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4194304
  export LD_PRELOAD=$lib/libEGL.so.1:$lib/libGLdispatch.so.0
fi

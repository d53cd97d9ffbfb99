#!/usr/bin/env bash
# tools/gpu-static.sh GPU CMD [ARGS...]: runs CMD, a program built here, on a
# fake GPU: Mesa 26.1's Vulkan driver for that GPU over Mesa's drm-shim (a
# preloaded library answering the kernel driver's ioctls; nothing executes).
# The driver reports the GPU's real properties and compiles every pipeline
# with its real compiler, so VKATTN_LOG=compile,kernels,stats shows what
# vkattn would build there and the compiler's statistics. Results are
# garbage. tools/gpu/static_sweep.sh tabulates the statistics.
#
#   tools/gpu-static.sh navi31 build/examples/vkattn-info
#   tools/gpu-static.sh ga102 env VKATTN_LOG=stats,kernels build/examples/vkattn-bench ...
#   tools/gpu-static.sh --list        the GPU names
#
# GPUs: navi21 (RDNA2), navi31 (RDNA3), gfx1201 (RDNA4): RADV/ACO;
# ga102 (Ampere), tu104 (Turing): NVK/NAK; a740, a660: turnip/ir3;
# m1: Honeykrisp/AGX. Mesa 26 comes from tools/with-mesa26.sh (fetched into
# $VKATTN_MESA26_DIR, default build/mesa26, with the drm-shim package).
#
# CMD runs through Debian 13's dynamic loader with the shim preloaded
# (--preload; LD_PRELOAD would reach Debian 12 programs, which lack its
# glibc). A leading `env VAR=VALUE...` is done here, not by /usr/bin/env
# (its exec would leave Debian 13's loader). Set for vkattn: no self-checks,
# no tuning, no pipeline cache; on NVK (whose shim reports 2 SMs) the board's
# SM count, VKATTN_DEVICE_COMPUTE_UNITS=82 (ga102) / 46 (tu104) unless set.
# The GPU, CMD and the arguments are checked before Mesa is fetched.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${VKATTN_MESA26_DIR:-$root/build/mesa26}
gpus="navi21 navi31 gfx1201 ga102 tu104 a740 a660 m1"

usage() { echo "usage: tools/gpu-static.sh GPU CMD [ARGS...] | --list  (GPU: $gpus)" >&2; exit 2; }
[ $# -ge 1 ] || usage
if [ "$1" = "--list" ]; then
  [ $# -eq 1 ] || usage
  tr ' ' '\n' <<<"$gpus"
  exit 0
fi
case "$1" in -*) echo "gpu-static: unknown option $1" >&2; usage ;; esac
gpu=$1
shift
[ $# -ge 1 ] || usage

# GPU -> Vulkan driver library, shim, the shim's GPU variable, SM count.
sms=
case "$gpu" in
  navi21 | navi31 | gfx1201) drv=radeon shim=amdgpu; export AMDGPU_GPU_ID=$gpu ;;
  ga102) drv=nouveau shim=nouveau sms=82; export NOUVEAU_CHIPSET=0x172 ;;
  tu104) drv=nouveau shim=nouveau sms=46; export NOUVEAU_CHIPSET=0x164 ;;
  a740 | a660) drv=freedreno shim=freedreno; export FD_GPU_ID=${gpu#a} ;;
  m1) drv=asahi shim=asahi ;;
  *) echo "gpu-static: unknown GPU '$gpu' (one of: $gpus)" >&2; exit 2 ;;
esac

# CMD (after a leading `env VAR=VALUE...`, applied below), found before
# anything is fetched.
envs=()
if [ "$1" = "env" ]; then
  shift
  while [ $# -gt 0 ] && [[ "$1" == *=* ]]; do envs+=("$1"); shift; done
  [ $# -ge 1 ] || usage
fi
cmd=$1
if [[ "$cmd" != */* ]]; then # ld.so wants a path
  cmd=$(type -P "$cmd") || { echo "gpu-static: $1: not found" >&2; exit 127; }
elif [ ! -f "$cmd" ]; then
  echo "gpu-static: $cmd: no such file" >&2
  exit 127
fi
shift

# Mesa 26 with the drm-shim package (fetched once; --fetch adds the shim to
# an older set). Quiet: the line below names the versions instead.
if [ ! -f "$dir/ready" ] || [ ! -f "$dir/ready-drm-shim" ]; then
  VKATTN_MESA26_DIR=$dir VKATTN_MESA26_QUIET=1 "$root/tools/with-mesa26.sh" --fetch
fi
lib=$dir/root/usr/lib/x86_64-linux-gnu
shim_so=$lib/lib${shim}_noop_drm_shim.so
[ -f "$shim_so" ] || { echo "gpu-static: $shim_so missing (rm $dir/ready-drm-shim and retry)" >&2; exit 1; }
[ -f "$lib/libvulkan_$drv.so" ] || { echo "gpu-static: $lib/libvulkan_$drv.so missing" >&2; exit 1; }

# An ICD manifest naming the driver by absolute path (the packaged ones
# name it relative to the system's library folders).
icd=$dir/gpu-static/${drv}_icd.json
mkdir -p "$dir/gpu-static" "$dir/no-implicit-layers"
printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", "api_version": "1.4"}}\n' \
  "$lib/libvulkan_$drv.so" >"$icd.tmp$$"
mv "$icd.tmp$$" "$icd"
export VK_ICD_FILENAMES=$icd VK_DRIVER_FILES=$icd
export VK_IMPLICIT_LAYER_PATH=$dir/no-implicit-layers # none (Debian 12's would load)
export VK_LAYER_PATH=$dir/root/usr/share/vulkan/explicit_layer.d
export MESA_SHADER_CACHE_DISABLE=true
# Submissions do nothing: self-checks would fail, timings mean nothing.
export VKATTN_SELF_CHECK=0 VKATTN_TUNING=0 VKATTN_PIPELINE_CACHE_DIR=
[ -n "$sms" ] && export VKATTN_DEVICE_COMPUTE_UNITS=${VKATTN_DEVICE_COMPUTE_UNITS:-$sms}

# Attention variants compile with Debian 13's shaderc, which knows
# coopmat (as tools/with-mesa26.sh does; a caller's own choice stays).
if [ -z "${VKATTN_SHADERC_LIBRARY+set}" ] && [ -f "$lib/libshaderc.so.1" ]; then
  export VKATTN_SHADERC_LIBRARY=$lib/libshaderc.so.1
fi
for e in "${envs[@]}"; do export "${e?}"; done # env VAR=VALUE... CMD: the variables, here
if [ -z "${VKATTN_MESA26_QUIET:-}" ]; then
  echo "gpu-static: $gpu on $drv, $(grep -E '^(mesa-vulkan-drivers|mesa-drm-shim) ' "$dir/versions" | paste -sd',' | sed 's/,/, /g')" >&2
fi
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" --preload "$shim_so" "$cmd" "$@"

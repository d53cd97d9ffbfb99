#!/usr/bin/env bash
# tools/with-mesa26.sh CMD [ARGS...]: runs CMD, a program built here on
# Debian 12, against lavapipe from Debian 13 backports (Mesa 26.1, which
# offers VK_KHR_cooperative_matrix), with Debian 13's Vulkan loader and
# validation layer. CMD may also be glslangValidator or spirv-val: Debian
# 13's (glslang 15, spirv-tools 2025.1), which compile and validate
# GL_KHR_cooperative_matrix; Debian 12's cannot.
#
# Nothing is installed: the packages are fetched once (apt-get download
# under a private apt configuration pointing at the Debian 13 suites) and
# unpacked into $VKATTN_MESA26_DIR (default build/mesa26). Their glibc is
# 2.41, so CMD is started through Debian 13's own dynamic loader with their
# libraries first on its path. Implicit layers are off (an empty
# VK_IMPLICIT_LAYER_PATH: Debian 12's would load); explicit layers (the
# validation layer) come from the fetched set. The versions that loaded are printed on stderr.
#
#   tools/with-mesa26.sh build/examples/vkattn-info
#   tools/with-mesa26.sh glslangValidator -V --target-env vulkan1.3 x.comp
#   tools/with-mesa26.sh --fetch      fetch only (prints the versions)
#
# The set includes mesa-drm-shim (Mesa's fake GPUs, for tools/gpu-static.sh);
# --fetch adds it to a set fetched before it was (marker file ready-drm-shim).
# The private apt configuration is tools/debian13-apt.sh's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${VKATTN_MESA26_DIR:-$root/build/mesa26}
# Exact versions this was last checked with; the archive replaces backports
# versions, so a missing one falls back to the newest (printed).
mesa_want=26.1.6-1~bpo13+1
tools_pkgs="glslang-tools spirv-tools"
mesa_pkgs="mesa-vulkan-drivers libvulkan1 vulkan-validationlayers"

. "$root/tools/debian13-apt.sh"

fetch() {
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  local apt=$dir.tmp/apt
  debian13_apt_config "$apt"
  if ! apt-get update -q >"$dir.tmp/apt.log" 2>&1; then
    cat "$dir.tmp/apt.log" >&2
    echo "with-mesa26: cannot read the Debian 13 (trixie) package lists" >&2
    exit 1
  fi
  local mesa_sel="mesa-vulkan-drivers=$mesa_want" shim_sel="mesa-drm-shim=$mesa_want"
  if ! debian13_has_version mesa-vulkan-drivers "$mesa_want"; then
    echo "with-mesa26: mesa-vulkan-drivers $mesa_want is gone from the archive; taking the newest backport" >&2
    mesa_sel=mesa-vulkan-drivers shim_sel=mesa-drm-shim
  fi
  if ! apt-get install --download-only -y -q $tools_pkgs >>"$dir.tmp/apt.log" 2>&1 ||
    ! apt-get install --download-only -y -q -t trixie-backports "$mesa_sel" "$shim_sel" libvulkan1 \
      vulkan-validationlayers >>"$dir.tmp/apt.log" 2>&1; then
    tail -n 30 "$dir.tmp/apt.log" >&2
    echo "with-mesa26: fetching the Debian 13 packages failed" >&2
    exit 1
  fi
  mkdir -p "$dir.tmp/root"
  local deb
  for deb in "$apt"/var/cache/apt/archives/*.deb; do
    dpkg-deb -x "$deb" "$dir.tmp/root"
    dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >>"$dir.tmp/versions"
  done
  # The loader finds lavapipe by absolute path (the manifest's is relative).
  local lib=$dir/root/usr/lib/x86_64-linux-gnu
  printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s/libvulkan_lvp.so", "api_version": "1.4"}}\n' \
    "$lib" >"$dir.tmp/lvp_icd.json"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  debian13_apt_config "$dir/apt" # its paths again, for later fetches
  touch "$dir/ready" "$dir/ready-drm-shim"
}

# Mesa's drm-shim (fake GPUs for tools/gpu-static.sh), added to a set
# fetched before it was part of it: only that package, at the version of the
# mesa-vulkan-drivers already there (the newest backport if that is gone).
# Its failure (no network) only warns: lavapipe does not need it. (It runs
# on the left of ||, where set -e is off: each step is checked.)
fetch_drm_shim() {
  local want sel tmp=$dir/drm-shim.tmp
  want=$(awk '$1 == "mesa-vulkan-drivers" { print $2 }' "$dir/versions")
  rm -rf "$tmp" && mkdir -p "$tmp" && debian13_apt_config "$dir/apt" || return 1
  if ! apt-get update -q >"$tmp/apt.log" 2>&1; then
    cat "$tmp/apt.log" >&2
    echo "with-mesa26: cannot read the Debian 13 (trixie) package lists" >&2
    return 1
  fi
  sel="mesa-drm-shim=$want"
  if ! debian13_has_version mesa-drm-shim "$want"; then
    echo "with-mesa26: mesa-drm-shim $want is gone from the archive; taking the newest backport" >&2
    sel=mesa-drm-shim/trixie-backports
  fi
  if ! (cd "$tmp" && apt-get download -q "$sel") >>"$tmp/apt.log" 2>&1; then
    tail -n 30 "$tmp/apt.log" >&2
    echo "with-mesa26: fetching mesa-drm-shim failed" >&2
    return 1
  fi
  dpkg-deb -x "$tmp"/mesa-drm-shim_*.deb "$dir/root" &&
    dpkg-deb --show --showformat='${Package} ${Version}\n' "$tmp"/mesa-drm-shim_*.deb >>"$dir/versions" &&
    rm -rf "$tmp" && touch "$dir/ready-drm-shim"
}

[ -f "$dir/ready" ] || fetch
if [ "${1:-}" = "--fetch" ] && [ ! -f "$dir/ready-drm-shim" ]; then
  # One fetch at a time (parallel callers wait, then find the marker).
  (flock 9 && { [ -f "$dir/ready-drm-shim" ] || fetch_drm_shim; }) 9>"$dir/drm-shim.lock" ||
    echo "with-mesa26: no drm shim (tools/gpu-static.sh needs it; lavapipe does not)" >&2
fi
lib=$dir/root/usr/lib/x86_64-linux-gnu
if [ -z "${VKATTN_MESA26_QUIET:-}" ]; then
  echo "with-mesa26: $(grep -E '^(mesa-vulkan-drivers|libvulkan1|vulkan-validationlayers|glslang-tools|spirv-tools|libc6) ' "$dir/versions" | paste -sd',' | sed 's/,/, /g')" >&2
fi
[ "${1:-}" = "--fetch" ] && exit 0
[ $# -ge 1 ] || { echo "usage: tools/with-mesa26.sh CMD [ARGS...]" >&2; exit 2; }
cmd=$1
shift
case "$cmd" in
  glslangValidator | spirv-val | spirv-dis) cmd=$dir/root/usr/bin/$cmd ;;
esac
export VK_ICD_FILENAMES=$dir/lvp_icd.json VK_DRIVER_FILES=$dir/lvp_icd.json
# No implicit layers (Debian 12's would load, and disabling them by name
# makes the loader warn through every debug messenger): an empty search
# path instead.
mkdir -p "$dir/no-implicit-layers"
export VK_IMPLICIT_LAYER_PATH=$dir/no-implicit-layers
export VK_LAYER_PATH=$dir/root/usr/share/vulkan/explicit_layer.d
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$cmd" "$@"

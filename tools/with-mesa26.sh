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
# The set includes mesa-drm-shim (Mesa's fake GPUs, for tools/gpu-static.sh)
# and libshaderc1 (shaderc 2025.2, glslang 15 inside: a GLSL compiler that
# knows GL_KHR_cooperative_matrix, so attention variants (user functions)
# run on coopmat); CMD gets VKATTN_SHADERC_LIBRARY naming it unless that is
# set already. A set fetched before one of them was part of it gets it at
# the next run (marker files ready-drm-shim, ready-shaderc).
# The private apt configuration is tools/debian13-apt.sh's.
#
# The arguments, CMD's path and apt-get/dpkg-deb are checked before anything
# is fetched. $VKATTN_MESA26_DIR is this script's own folder: a fetch
# downloads into a new folder beside it and moves that in, and replaces only
# an empty folder or one this script made (its mark, .vkattn-mesa26, written
# with it); any other folder there is refused (exit 1), never deleted.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${VKATTN_MESA26_DIR:-$root/build/mesa26}
while [ "$dir" != / ] && [ "${dir%/}" != "$dir" ]; do dir=${dir%/}; done # (its siblings' names)
mark=.vkattn-mesa26

usage() { echo "usage: tools/with-mesa26.sh CMD [ARGS...] | --fetch" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in
  --fetch) [ $# -eq 1 ] || { echo "with-mesa26: --fetch takes no arguments" >&2; usage; } ;;
  -*) echo "with-mesa26: unknown option $1" >&2; usage ;;
esac
# CMD: one of the fetched set's tools, a path, or a name on PATH.
cmd=
if [ "$1" != --fetch ]; then
  case "$1" in
    glslangValidator | spirv-val | spirv-dis) cmd=$1 ;;
    */*) [ -f "$1" ] || { echo "with-mesa26: $1: no such file" >&2; exit 127; }; cmd=$1 ;;
    *) # ld.so opens a bare name in the current folder; else the one on PATH
      if [ -f "$1" ]; then cmd=./$1; else
        cmd=$(type -P "$1") || { echo "with-mesa26: $1: not found" >&2; exit 127; }
      fi ;;
  esac
fi

# Whether $1 is a folder this script made (its mark), or an empty one.
ours() { [ -f "$1/$mark" ]; }
empty_dir() { [ -d "$1" ] && [ ! -L "$1" ] && [ -z "$(ls -A "$1")" ]; }
refuse_dir() {
  echo "with-mesa26: $dir exists and is not a folder this script made (no $dir/$mark, no" \
    "fetched set in it); it is left as it is: point VKATTN_MESA26_DIR at a new or empty" \
    "folder, or remove it yourself" >&2
  exit 1
}
if [ ! -f "$dir/ready" ]; then
  if { [ -e "$dir" ] || [ -L "$dir" ]; } && ! ours "$dir" && ! empty_dir "$dir"; then refuse_dir; fi
  for t in apt-get apt-cache dpkg-deb; do
    command -v "$t" >/dev/null || {
      echo "with-mesa26: $t not found (fetching needs Debian's apt and dpkg)" >&2
      exit 1
    }
  done
fi
# Exact versions this was last checked with; the archive replaces backports
# versions, so a missing one falls back to the newest (printed).
mesa_want=26.1.6-1~bpo13+1
tools_pkgs="glslang-tools spirv-tools libshaderc1"
mesa_pkgs="mesa-vulkan-drivers libvulkan1 vulkan-validationlayers"

. "$root/tools/debian13-apt.sh"

# Downloads and unpacks the set into a new folder of its own beside $dir
# (removed again if this fails), then moves it to $dir.
fetch_tmp=
fetch() {
  mkdir -p "$(dirname "$dir")"
  fetch_tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$fetch_tmp"' EXIT
  echo "made by tools/with-mesa26.sh, which may replace this folder" >"$fetch_tmp/$mark"
  local apt=$fetch_tmp/apt
  debian13_apt_config "$apt"
  if ! apt-get update -q >"$fetch_tmp/apt.log" 2>&1; then
    cat "$fetch_tmp/apt.log" >&2
    echo "with-mesa26: cannot read the Debian 13 (trixie) package lists" >&2
    exit 1
  fi
  local mesa_sel="mesa-vulkan-drivers=$mesa_want" shim_sel="mesa-drm-shim=$mesa_want"
  if ! debian13_has_version mesa-vulkan-drivers "$mesa_want"; then
    echo "with-mesa26: mesa-vulkan-drivers $mesa_want is gone from the archive; taking the newest backport" >&2
    mesa_sel=mesa-vulkan-drivers shim_sel=mesa-drm-shim
  fi
  if ! apt-get install --download-only -y -q $tools_pkgs >>"$fetch_tmp/apt.log" 2>&1 ||
    ! apt-get install --download-only -y -q -t trixie-backports "$mesa_sel" "$shim_sel" libvulkan1 \
      vulkan-validationlayers >>"$fetch_tmp/apt.log" 2>&1; then
    tail -n 30 "$fetch_tmp/apt.log" >&2
    echo "with-mesa26: fetching the Debian 13 packages failed" >&2
    exit 1
  fi
  mkdir -p "$fetch_tmp/root"
  local deb
  for deb in "$apt"/var/cache/apt/archives/*.deb; do
    dpkg-deb -x "$deb" "$fetch_tmp/root"
    dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >>"$fetch_tmp/versions"
  done
  # The loader finds lavapipe by absolute path (the manifest's is relative).
  local lib=$dir/root/usr/lib/x86_64-linux-gnu
  printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s/libvulkan_lvp.so", "api_version": "1.4"}}\n' \
    "$lib" >"$fetch_tmp/lvp_icd.json"
  # A parallel fetch may have finished first: keep that one. Otherwise
  # replace an empty folder or one of this script's (checked again now).
  if [ -f "$dir/ready" ]; then
    rm -rf "$fetch_tmp"
    trap - EXIT
    return
  fi
  if ours "$dir"; then
    rm -rf "$dir"
  elif empty_dir "$dir"; then
    rmdir "$dir"
  elif [ -e "$dir" ] || [ -L "$dir" ]; then
    refuse_dir
  fi
  mv "$fetch_tmp" "$dir"
  trap - EXIT
  debian13_apt_config "$dir/apt" # its paths again, for later fetches
  touch "$dir/ready" "$dir/ready-drm-shim" "$dir/ready-shaderc"
}

# One package added to a set fetched before it was part of it:
# fetch_extra PKG MARKER SUITE. Mesa's drm-shim (fake GPUs for
# tools/gpu-static.sh) comes at the version of the mesa-vulkan-drivers
# already there (the newest backport if that is gone); libshaderc1 from
# trixie. Its failure (no network) only warns: lavapipe needs neither. (It
# runs on the left of ||, where set -e is off: each step is checked.)
fetch_extra() {
  local pkg=$1 marker=$2 want sel tmp=$dir/$1.tmp
  rm -rf "$tmp" && mkdir -p "$tmp" && debian13_apt_config "$dir/apt" || return 1
  if ! apt-get update -q >"$tmp/apt.log" 2>&1; then
    cat "$tmp/apt.log" >&2
    echo "with-mesa26: cannot read the Debian 13 (trixie) package lists" >&2
    return 1
  fi
  sel=$pkg/trixie
  if [ "$pkg" = mesa-drm-shim ]; then
    want=$(awk '$1 == "mesa-vulkan-drivers" { print $2 }' "$dir/versions")
    sel="mesa-drm-shim=$want"
    if ! debian13_has_version mesa-drm-shim "$want"; then
      echo "with-mesa26: mesa-drm-shim $want is gone from the archive; taking the newest backport" >&2
      sel=mesa-drm-shim/trixie-backports
    fi
  fi
  if ! (cd "$tmp" && apt-get download -q "$sel") >>"$tmp/apt.log" 2>&1; then
    tail -n 30 "$tmp/apt.log" >&2
    echo "with-mesa26: fetching $pkg failed" >&2
    return 1
  fi
  dpkg-deb -x "$tmp/${pkg}"_*.deb "$dir/root" &&
    dpkg-deb --show --showformat='${Package} ${Version}\n' "$tmp/${pkg}"_*.deb >>"$dir/versions" &&
    rm -rf "$tmp" && touch "$dir/$marker"
}

[ -f "$dir/ready" ] || fetch
if [ "$1" = "--fetch" ] && [ ! -f "$dir/ready-drm-shim" ]; then
  # One fetch at a time (parallel callers wait, then find the marker).
  (flock 9 && { [ -f "$dir/ready-drm-shim" ] || fetch_extra mesa-drm-shim ready-drm-shim; }) \
    9>"$dir/drm-shim.lock" ||
    echo "with-mesa26: no drm shim (tools/gpu-static.sh needs it; lavapipe does not)" >&2
fi
if [ ! -f "$dir/ready-shaderc" ]; then
  (flock 9 && { [ -f "$dir/ready-shaderc" ] || fetch_extra libshaderc1 ready-shaderc; }) \
    9>"$dir/shaderc.lock" ||
    echo "with-mesa26: no Debian 13 shaderc (attention variants stay off coopmat)" >&2
fi
lib=$dir/root/usr/lib/x86_64-linux-gnu
if [ -z "${VKATTN_MESA26_QUIET:-}" ]; then
  echo "with-mesa26: $(grep -E '^(mesa-vulkan-drivers|libvulkan1|vulkan-validationlayers|glslang-tools|spirv-tools|libshaderc1|libc6) ' "$dir/versions" | paste -sd',' | sed 's/,/, /g')" >&2
fi
[ "$1" = "--fetch" ] && exit 0
shift
case "$cmd" in
  glslangValidator | spirv-val | spirv-dis) cmd=$dir/root/usr/bin/$cmd ;;
esac
# The GLSL compiler of attention variants: Debian 13's shaderc, which knows
# coopmat (a caller's own choice stays).
if [ -z "${VKATTN_SHADERC_LIBRARY+set}" ] && [ -f "$lib/libshaderc.so.1" ]; then
  export VKATTN_SHADERC_LIBRARY=$lib/libshaderc.so.1
fi
export VK_ICD_FILENAMES=$dir/lvp_icd.json VK_DRIVER_FILES=$dir/lvp_icd.json
# No implicit layers (Debian 12's would load, and disabling them by name
# makes the loader warn through every debug messenger): an empty search
# path instead.
mkdir -p "$dir/no-implicit-layers"
export VK_IMPLICIT_LAYER_PATH=$dir/no-implicit-layers
export VK_LAYER_PATH=$dir/root/usr/share/vulkan/explicit_layer.d
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$cmd" "$@"

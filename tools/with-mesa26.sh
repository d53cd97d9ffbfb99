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
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${VKATTN_MESA26_DIR:-$root/build/mesa26}
# Exact versions this was last checked with; the archive replaces backports
# versions, so a missing one falls back to the newest (printed).
mesa_want=26.1.6-1~bpo13+1
tools_pkgs="glslang-tools spirv-tools"
mesa_pkgs="mesa-vulkan-drivers libvulkan1 vulkan-validationlayers"

fetch() {
  local apt=$dir/apt
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  apt=$dir.tmp/apt
  mkdir -p "$apt/etc/apt/sources.list.d" "$apt/etc/apt/apt.conf.d" "$apt/etc/apt/preferences.d" \
    "$apt/var/lib/apt/lists/partial" "$apt/var/cache/apt/archives/partial" "$apt/var/lib/dpkg"
  : >"$apt/var/lib/dpkg/status"
  cat >"$apt/etc/apt/sources.list.d/trixie.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  cat >"$apt/apt.conf" <<CONF
Dir "$apt/";
Dir::State "$apt/var/lib/apt/";
Dir::State::status "$apt/var/lib/dpkg/status";
Dir::Cache "$apt/var/cache/apt/";
Dir::Etc "$apt/etc/apt/";
Dir::Etc::SourceList "/dev/null";
Dir::Etc::SourceParts "$apt/etc/apt/sources.list.d/";
Dir::Etc::Parts "$apt/etc/apt/apt.conf.d/";
Dir::Etc::PreferencesParts "$apt/etc/apt/preferences.d/";
APT::Architecture "amd64";
CONF
  export APT_CONFIG=$apt/apt.conf
  if ! apt-get update -q >"$dir.tmp/apt.log" 2>&1; then
    cat "$dir.tmp/apt.log" >&2
    echo "with-mesa26: cannot read the Debian 13 (trixie) package lists" >&2
    exit 1
  fi
  local mesa_sel="mesa-vulkan-drivers=$mesa_want"
  if ! apt-cache show "mesa-vulkan-drivers=$mesa_want" >/dev/null 2>&1; then
    echo "with-mesa26: mesa-vulkan-drivers $mesa_want is gone from the archive; taking the newest backport" >&2
    mesa_sel=mesa-vulkan-drivers
  fi
  if ! apt-get install --download-only -y -q $tools_pkgs >>"$dir.tmp/apt.log" 2>&1 ||
    ! apt-get install --download-only -y -q -t trixie-backports "$mesa_sel" libvulkan1 \
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
  touch "$dir/ready"
}

[ -f "$dir/ready" ] || fetch
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

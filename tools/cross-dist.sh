#!/usr/bin/env bash
# What a release ships, for every platform (tools/cross.sh dist runs it):
#   bash tools/cross-dist.sh DIST_DIR NATIVE_BUILD WIN_BUILD ARM64_BUILD
# NATIVE_BUILD: an ordinary Linux x86_64 build with -DVKATTN_BINDINGS=ON;
# WIN_BUILD, ARM64_BUILD: `tools/cross.sh windows-x64|aarch64 build` folders.
# Writes into DIST_DIR (made if absent):
#   vkattn-VERSION-windows-x64.zip   vkattn.dll, libvkattn.dll.a, the header,
#                                    the CMake package and pkg-config file,
#                                    the tools and examples as .exe
#   *_amd64.deb, *_arm64.deb         libvkattn0, libvkattn-dev, vkattn-tools
#   vkattn-VERSION.jar               the classes with the natives of
#                                    linux-x86_64, linux-aarch64 and
#                                    windows-x86_64 (/org/vkattn/native/)
#   csharp/Vkattn.dll + csharp/runtimes/<rid>/native/   NuGet's layout for
#                                    linux-x64, linux-arm64, win-x64
# Every input is checked before anything is written.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: tools/cross-dist.sh DIST_DIR NATIVE_BUILD WIN_BUILD ARM64_BUILD" >&2; exit 2; }
dist=$1
abs() { (cd "$1" 2>/dev/null && pwd) || { echo "cross-dist: $1 is not a folder" >&2; exit 2; }; }
native=$(abs "$2") win=$(abs "$3") arm=$(abs "$4")
need() { [ -e "$1" ] || { echo "cross-dist: $1 is missing ($2)" >&2; exit 2; }; }
need "$native/bindings/java/vkattn.jar" "an ordinary build with -DVKATTN_BINDINGS=ON"
need "$native/bindings/csharp/Vkattn.dll" "an ordinary build with -DVKATTN_BINDINGS=ON"
need "$win/vkattn.dll" "tools/cross.sh windows-x64 build"
need "$win/bindings/java/vkattn_java.dll" "tools/cross.sh windows-x64 build"
need "$win/bindings/csharp/libvkattn_csharp.dll" "tools/cross.sh windows-x64 build"
need "$arm/bindings/java/libvkattn_java.so" "tools/cross.sh aarch64 build"
need "$arm/bindings/csharp/libvkattn_csharp.so" "tools/cross.sh aarch64 build"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$native/CMakeCache.txt")
[ -n "$version" ] || { echo "cross-dist: no project version in $native/CMakeCache.txt" >&2; exit 2; }
mkdir -p "$dist"
dist=$(abs "$dist")
tmp=$(mktemp -d "$dist/.partial-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Windows: an install prefix, zipped.
stage=$tmp/vkattn-$version-windows-x64
cmake --install "$win" --prefix "$stage" >/dev/null
cp "$win"/examples/*.exe "$stage/bin/" 2>/dev/null || true
(cd "$tmp" && cmake -E tar cf "$dist/vkattn-$version-windows-x64.zip" --format=zip \
  "vkattn-$version-windows-x64")

# Debian packages of both Linux builds.
for b in "$native" "$arm"; do
  (cd "$b" && cpack -G DEB -B "$tmp/deb" >/dev/null)
done
cp "$tmp"/deb/*.deb "$dist/"

# The jar with every platform's natives.
jar=$(command -v jar || echo /usr/lib/jvm/default-java/bin/jar)
cp "$native/bindings/java/vkattn.jar" "$tmp/vkattn.jar"
j=$tmp/jar/org/vkattn/native
mkdir -p "$j/linux-aarch64" "$j/windows-x86_64"
cp "$arm/bindings/java/libvkattn_java.so" "$j/linux-aarch64/"
cp -L "$arm/libvkattn.so.0" "$j/linux-aarch64/libvkattn.so.0"
cp "$win/bindings/java/vkattn_java.dll" "$win/vkattn.dll" "$j/windows-x86_64/"
"$jar" uf "$tmp/vkattn.jar" -C "$tmp/jar" org
cp "$tmp/vkattn.jar" "$dist/vkattn-$version.jar"

# C#: the managed assembly and NuGet's runtimes/<rid>/native/ layout.
cs=$dist/csharp
rm -rf "$cs"
mkdir -p "$cs/runtimes/linux-x64/native" "$cs/runtimes/linux-arm64/native" \
  "$cs/runtimes/win-x64/native"
cp "$native/bindings/csharp/Vkattn.dll" "$cs/"
cp "$native/bindings/csharp/libvkattn_csharp.so" "$cs/runtimes/linux-x64/native/"
cp -L "$native/libvkattn.so.0" "$cs/runtimes/linux-x64/native/"
cp "$arm/bindings/csharp/libvkattn_csharp.so" "$cs/runtimes/linux-arm64/native/"
cp -L "$arm/libvkattn.so.0" "$cs/runtimes/linux-arm64/native/"
cp "$win/bindings/csharp/libvkattn_csharp.dll" "$win/vkattn.dll" "$cs/runtimes/win-x64/native/"

echo "cross-dist: $dist"
(cd "$dist" && ls -1 *.zip *.deb *.jar && find csharp -type f | sort)

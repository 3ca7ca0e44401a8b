#!/bin/sh
# Installs the Debian packages kiln needs to build, test and run, when they
# are missing. As root it installs them with apt-get; otherwise it names the
# missing ones and fails.
#
# usage: scripts/deps.sh [build|test|fuzz|windows]
#
# `windows` is what scripts/windows-deps.sh needs for the cross build and
# its tests: the mingw-w64 toolchain, wine, and the tools that unpack
# Debian source packages.
set -eu

build_pkgs="cmake ninja-build gcc pkg-config libzstd-dev libxxhash-dev libshaderc-dev
  libvulkan-dev mesa-vulkan-drivers libjson-c-dev zlib1g-dev spirv-tools glslang-dev"
test_pkgs="$build_pkgs hwloc clang libclang-rt-dev vulkan-validationlayers clang-format clang-tidy
  g++ python3-matplotlib abigail-tools"
fuzz_pkgs="$test_pkgs clang"
windows_pkgs="cmake ninja-build pkg-config dpkg-dev xz-utils gcc-mingw-w64-x86-64
  libz-mingw-w64-dev wine wine64 libvulkan-dev"

case "${1:-build}" in
build) want=$build_pkgs ;;
test) want=$test_pkgs ;;
fuzz) want=$fuzz_pkgs ;;
windows) want=$windows_pkgs ;;
*) echo "usage: $0 [build|test|fuzz|windows]" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "kiln: missing Debian packages:$missing" >&2
    echo "kiln: run as root, or: sudo apt-get install$missing" >&2
    exit 1
fi
echo "kiln: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null

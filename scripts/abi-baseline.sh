#!/bin/sh
# Writes the ABI baseline abi/libkiln.so.N.abi (N: the SONAME's number)
# from a built shared library, with abidw over the public headers only.
# Run it in the commit that changes the ABI on purpose, after bumping
# SOVERSION in src/CMakeLists.txt and saying so in CHANGELOG.md; remove the
# old baseline in the same commit (docs/abi.md, "Updating the baseline").
#
# usage: scripts/abi-baseline.sh [BUILD_DIR]   (default: build)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
lib="$build/src/libkiln.so"
[ -e "$lib" ] || { echo "abi-baseline: no libkiln.so in $build/src (build it first)" >&2; exit 1; }
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ -n "$soname" ] || { echo "abi-baseline: $lib has no SONAME" >&2; exit 1; }
out="$root/abi/$soname.abi"
abidw --headers-dir "$root/include" --drop-private-types --no-corpus-path \
    --out-file "$out" "$lib"
echo "abi-baseline: wrote ${out#$root/} from $lib"

#!/bin/sh
# usage: spirv_client.sh CC PREFIX SOURCE OUT
# Builds SOURCE (a C client of SPIRV-Tools and kiln) against the kiln
# installed in PREFIX, linking its libkiln.a (and what kiln.pc's static
# flags name), then runs it.
set -u
cc=${1:?usage: spirv_client.sh CC PREFIX SOURCE OUT}
prefix=$2 src=$3 out=$4
pc=$(find "$prefix" -name kiln.pc | head -1)
lib=$(find "$prefix" -name libkiln.a | head -1)
if [ -z "$pc" ] || [ -z "$lib" ]; then
    echo "spirv_client: no kiln.pc or libkiln.a under $prefix"
    exit 1
fi
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
cflags=$(pkg-config --cflags kiln) || exit 1
libs=$(pkg-config --static --libs kiln | sed -E 's/(^| )-lkiln( |$)/ /') || exit 1
mkdir -p "$out" || exit 1
# shellcheck disable=SC2086
if ! "$cc" -std=c11 -Wall -Wextra -Werror $cflags -o "$out/spirv_client" "$src" "$lib" $libs; then
    echo "spirv_client: linking a libspirv.h client with $lib failed"
    exit 1
fi
"$out/spirv_client"

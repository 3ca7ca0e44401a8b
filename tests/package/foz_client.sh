#!/bin/sh
# usage: foz_client.sh CC PREFIX SOURCE ARCHIVE OUT
# Checks that PREFIX holds kiln/foz.h and that kiln.h includes it, builds
# SOURCE (a C client of kiln's Fossilize functions, <kiln.h> only) against
# the kiln installed in PREFIX through pkg-config, linking the shared
# libkiln, and runs it on ARCHIVE with OUT as its folder.
set -u
cc=${1:?usage: foz_client.sh CC PREFIX SOURCE ARCHIVE OUT}
prefix=$2 src=$3 archive=$4 out=$5
pc=$(find "$prefix" -name kiln.pc | head -1)
hdr=$(find "$prefix" -path '*/include/kiln/foz.h' | head -1)
if [ -z "$pc" ] || [ -z "$hdr" ]; then
    echo "foz_client: no kiln.pc or include/kiln/foz.h under $prefix"
    exit 1
fi
if ! grep -q '#include "kiln/foz.h"' "$(dirname "$hdr")/../kiln.h"; then
    echo "foz_client: the installed kiln.h does not include kiln/foz.h"
    exit 1
fi
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
cflags=$(pkg-config --cflags kiln) || exit 1
libs=$(pkg-config --libs kiln) || exit 1
libdir=$(pkg-config --variable=libdir kiln) || exit 1
rm -rf "$out" && mkdir -p "$out" || exit 1
# shellcheck disable=SC2086
if ! "$cc" -std=c11 -Wall -Wextra -Werror $cflags -o "$out/foz_client" "$src" $libs \
    "-Wl,-rpath,$libdir"; then
    echo "foz_client: building against the installed kiln failed"
    exit 1
fi
if ! ldd "$out/foz_client" | grep -q "libkiln\.so\.[0-9]* => $prefix/"; then
    echo "foz_client: the client does not use $prefix's libkiln.so"
    exit 1
fi
"$out/foz_client" "$archive" "$out"

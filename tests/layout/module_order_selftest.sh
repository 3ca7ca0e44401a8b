#!/bin/sh
# module_order_selftest.sh SCRIPT - the negative control of layout.module_order:
# a tree whose pack module uses the cache (a module above it) must fail the
# check, and the same tree without that include must pass it.
set -u
script=${1:?usage: module_order_selftest.sh SCRIPT}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include/kiln" "$tmp/src/common" "$tmp/src/pack" "$tmp/src/cache"
printf '#include "kiln/common.h"\n' > "$tmp/include/kiln/pack.h"
printf '#include "kiln/pack.h"\n' > "$tmp/include/kiln/cache.h"
: > "$tmp/include/kiln/common.h"
printf '#include "kiln/cache.h"\n' > "$tmp/src/cache/cache.c"
printf '#include "kiln/pack.h"\n#include "kiln/cache.h"\n' > "$tmp/src/pack/pack.c"
if sh "$script" --check "$tmp" >/dev/null 2>&1; then
    echo "module_order_selftest: pack using the cache was not caught"
    exit 1
fi
printf '#include "kiln/pack.h"\n' > "$tmp/src/pack/pack.c"
if ! sh "$script" --check "$tmp" >/dev/null; then
    echo "module_order_selftest: a tree that keeps the order was refused"
    exit 1
fi
echo "module_order_selftest: a use of a higher module is caught, the order passes"

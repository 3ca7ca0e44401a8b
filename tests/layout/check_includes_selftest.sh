#!/bin/sh
# check_includes_selftest.sh CHECKER - the negative control of
# check_includes.sh: a small tree with one include of each forbidden kind
# must fail, naming each, and the same tree without them must pass.
set -u
checker=${1:?usage: check_includes_selftest.sh CHECKER}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/common" "$tmp/src/a" "$tmp/src/b" "$tmp/tools/t" "$tmp/tools/support" \
         "$tmp/tools/include/kiln-tools"
: > "$tmp/src/common/kiln_internal.h"
: > "$tmp/src/a/a_internal.h"
: > "$tmp/src/b/b_internal.h"
: > "$tmp/tools/support/tool_internal.h"
: > "$tmp/tools/t/t_internal.h"
: > "$tmp/tools/include/kiln-tools/t.h"
good='#include "kiln_internal.h"
#include "a_internal.h"
#include "kiln/cache.h"
#include <stdio.h>'
printf '%s\n' "$good" > "$tmp/src/a/a.c"
printf '#include "tool_internal.h"\n#include "t_internal.h"\n#include "kiln-tools/t.h"\n#include "kiln/prep.h"\n' \
    > "$tmp/tools/t/t.c"
if ! "$checker" "$tmp" > "$tmp/out" 2>&1; then
    echo "selftest: a tree that keeps the rule was refused:"; cat "$tmp/out"; exit 1
fi
printf '%s\n#include "b_internal.h"\n#include "kiln-tools/t.h"\n#include "t_internal.h"\n' "$good" \
    > "$tmp/src/a/a.c"
printf '#include "kiln_internal.h"\n' >> "$tmp/tools/t/t.c"
if "$checker" "$tmp" > "$tmp/out" 2>&1; then
    echo "selftest: a tree that breaks the rule passed:"; cat "$tmp/out"; exit 1
fi
for want in 'src/a/a.c: includes b_internal.h' 'src/a/a.c: includes kiln-tools/t.h' \
            'src/a/a.c: includes t_internal.h' 'tools/t/t.c: includes kiln_internal.h'; do
    if ! grep -qF "$want" "$tmp/out"; then
        echo "selftest: no line for '$want' in:"; cat "$tmp/out"; exit 1
    fi
done
echo "selftest: check_includes refuses each forbidden include and passes the rest"

#!/bin/sh
# check_alloc.sh ROOT [DIR...] - every allocation of the library goes
# through kiln's allocator (src/common/alloc.c, docs/api.md "Memory"): no
# file under DIR (default: src, src/foz included, and the tool units whose
# memory kiln frees: tools/gen, tools/glsl) but alloc.c calls libc's
# malloc, calloc, realloc, free or strdup. Comments are stripped first
# (the C comments of one line, and lines inside a block comment that start
# with '*'), so prose may say "malloc". Prints one line per call
# ("FILE:LINE: calls free: use kiln__free") and exits 1 when there is one.
set -u
root=${1:?usage: check_alloc.sh ROOT [DIR...]}
shift
cd "$root" || exit 2
[ $# -gt 0 ] || set -- src tools/gen tools/glsl
bad=0
for f in $(find "$@" -name '*.c' -o -name '*.h' | sort); do
    # alloc.c is the door itself; builtin_dict.c is a program run at build
    # time, not part of a library.
    case $f in */common/alloc.c | */gen/builtin_dict.c) continue;; esac
    hits=$(sed -e 's|/\*.*\*/||g' -e 's|//.*$||' -e 's|^[[:space:]]*\*.*$||' "$f" |
        grep -nE '(^|[^A-Za-z0-9_.>])(malloc|calloc|realloc|free|strdup)[[:space:]]*\(') || continue
    echo "$hits" | while IFS= read -r h; do
        line=${h%%:*}
        fn=$(echo "$h" | grep -oE '(^|[^A-Za-z0-9_.>])(malloc|calloc|realloc|free|strdup)[[:space:]]*\(' |
            head -1 | tr -dc 'a-z')
        case $f in
        tools/*) echo "$f:$line: calls $fn: use kiln__$fn (tools/support/tool_internal.h)";;
        *) echo "$f:$line: calls $fn: use kiln__$fn (src/common/alloc.c)";;
        esac
    done
    bad=1
done
exit $bad

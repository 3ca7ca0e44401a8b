#!/bin/sh
# check_alloc_selftest.sh CHECK - check_alloc.sh's negative control: a tree
# with a bare free() is refused and names the line; the same tree with it
# routed (and the word in a comment) passes.
set -u
check=${1:?usage: check_alloc_selftest.sh CHECK}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/m" "$tmp/src/common"
printf '/* free(p) here is prose */\nvoid f(void *p)\n{\n    free(p);\n}\n' > "$tmp/src/m/m.c"
printf 'void *g(void) { return malloc(1); }\n' > "$tmp/src/common/alloc.c"
out=$(sh "$check" "$tmp" src) && { echo "a bare free() passed"; exit 1; }
echo "$out" | grep -q '^src/m/m.c:4: calls free' || { echo "unexpected: $out"; exit 1; }
printf '/* free(p) here is prose */\nvoid f(void *p)\n{\n    kiln__free(p);\n}\n' > "$tmp/src/m/m.c"
out=$(sh "$check" "$tmp" src) || { echo "a routed free() was refused: $out"; exit 1; }
echo "ok"

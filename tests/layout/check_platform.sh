#!/bin/sh
# check_platform.sh ROOT [DIR...] - platform code lives in platform files
# (docs/design.md): no portable C file or header under DIR (default: src
# and tools) names _WIN32; only NAME_unix.c and NAME_win.c may. Comments
# are stripped first (as check_alloc.sh does), so prose may name it.
# Prints one line per file and exits 1 when there is one.
set -u
root=${1:?usage: check_platform.sh ROOT [DIR...]}
shift
cd "$root" || exit 2
[ $# -gt 0 ] || set -- src tools
bad=0
for f in $(find "$@" \( -name '*.c' -o -name '*.h' \) ! -name '*_unix.c' ! -name '*_win.c' | sort); do
    line=$(sed -e 's|/\*.*\*/||g' -e 's|//.*$||' -e 's|^[[:space:]]*\*.*$||' "$f" |
        grep -n '_WIN32' | head -1 | cut -d: -f1)
    if [ -n "$line" ]; then
        echo "$f:$line: names _WIN32: move the platform code to a NAME_unix.c / NAME_win.c pair"
        bad=1
    fi
done
exit $bad

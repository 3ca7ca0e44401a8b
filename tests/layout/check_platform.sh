#!/bin/sh
# check_platform.sh ROOT [DIR...] - platform code lives in platform files
# (docs/design.md): no portable C file or header under DIR (default: src
# and tools) names _WIN32; only NAME_unix.c and NAME_win.c may. Comments
# are stripped first (as check_alloc.sh does), so prose may name it.
# Files still waiting to be split are listed in the allowlist below, each
# with its reason; a file on it that no longer names _WIN32 is reported
# too, so the list only shrinks. Prints one line per file and exits 1 when
# there is one.
set -u
root=${1:?usage: check_platform.sh ROOT [DIR...]}
shift
cd "$root" || exit 2
[ $# -gt 0 ] || set -- src tools
# The benchmarks measure in forked children (and Linux's page cache): these
# files are POSIX, with the Windows build's "not available" stub or guard
# inline. Splitting them into _unix.c / _win.c pairs is open work.
allowed="tools/kiln/bench_child.c tools/kiln/bench_child.h tools/kiln/bench_prepare.c
tools/kiln/bench_replay.c tools/kiln/bench_start.c tools/kiln/bench_store.c
tools/kiln/bench_stutter.c tools/kiln/bench_twice.c"
bad=0
for f in $(find "$@" \( -name '*.c' -o -name '*.h' \) ! -name '*_unix.c' ! -name '*_win.c' | sort); do
    listed=0
    for a in $allowed; do [ "$f" = "$a" ] && listed=1; done
    line=$(sed -e 's|/\*.*\*/||g' -e 's|//.*$||' -e 's|^[[:space:]]*\*.*$||' "$f" |
        grep -n '_WIN32' | head -1 | cut -d: -f1)
    if [ -n "$line" ] && [ $listed -eq 0 ]; then
        echo "$f:$line: names _WIN32: move the platform code to a NAME_unix.c / NAME_win.c pair"
        bad=1
    elif [ -z "$line" ] && [ $listed -eq 1 ]; then
        echo "$f: no longer names _WIN32: take it off check_platform.sh's allowlist"
        bad=1
    fi
done
exit $bad

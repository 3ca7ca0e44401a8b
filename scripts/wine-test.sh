#!/bin/sh
# Runs one kiln test program under wine: the Windows build's
# CMAKE_CROSSCOMPILING_EMULATOR (cmake/mingw-w64.cmake).
#
# usage: wine-test.sh WINE PROGRAM [ARG...]
#
# A kiln test prints "run  CASE" before each case. When wine fails before
# that line, the program never got to its main: wine did not start it. Such
# a start is tried once more, and the retry is said on stderr. A failure
# after the line is the test's own and is passed on as it is.
set -u

wine=$1
shift
log=$(mktemp "${TMPDIR:-/tmp}/kiln-wine-test.XXXXXX") || exit 1
trap 'rm -f "$log" "$log.rc"' EXIT

for attempt in 1 2; do
    rm -f "$log.rc"
    { "$wine" "$@"; echo $? >"$log.rc"; } 2>&1 | tee "$log"
    rc=$(cat "$log.rc" 2>/dev/null || echo 1)
    if [ "$rc" -eq 0 ] || grep -q '^run  ' "$log" || [ "$attempt" -eq 2 ]; then
        exit "$rc"
    fi
    echo "wine-test: wine ended with status $rc before $1 started; starting it again" >&2
done

#!/bin/sh
# Runs one kiln test program under wine: the Windows build's
# CMAKE_CROSSCOMPILING_EMULATOR (cmake/mingw-w64.cmake).
#
# usage: wine-test.sh WINE PROGRAM [ARG...]
#
# A kiln test prints "run  CASE" before each case and "ok   CASE" or
# "FAIL CASE" after it. Two things wine does are tried once more, with the
# retry said on stderr:
#   - wine failed before the first "run" line: the program never got to its
#     main, wine did not start it;
#   - every case said ok and the process was then killed (SIGKILL, status
#     137) on its way out, after its last line: seen once in CI, under
#     load, on vk_loader.default_loader, a program that loads Vulkan
#     through wine; the kill comes from wine's exit, not from a case.
# Any other failure is the test's own and is passed on as it is; the retry
# runs every case again, so it hides nothing a case checks.
set -u

wine=$1
shift
log=$(mktemp "${TMPDIR:-/tmp}/kiln-wine-test.XXXXXX") || exit 1
trap 'rm -f "$log" "$log.rc"' EXIT

for attempt in 1 2; do
    rm -f "$log.rc"
    { "$wine" "$@"; echo $? >"$log.rc"; } 2>&1 | tee "$log"
    rc=$(cat "$log.rc" 2>/dev/null || echo 1)
    [ "$rc" -eq 0 ] || [ "$attempt" -eq 2 ] && exit "$rc"
    if ! grep -q '^run  ' "$log"; then
        echo "wine-test: wine ended with status $rc before $1 started; starting it again" >&2
    elif [ "$rc" -eq 137 ] && ! grep -q '^FAIL ' "$log" &&
        grep -E '^(run  |ok   )' "$log" | tail -n 1 | grep -q '^ok   '; then
        echo "wine-test: wine killed $1 after its cases passed; running it again" >&2
    else
        exit "$rc"
    fi
done

#!/bin/sh
# Builds kiln for Windows with mingw-w64 and runs its tests under wine.
# Run scripts/windows-deps.sh first (`make test-windows` runs both).
#
# usage: scripts/test-windows.sh [BUILD]     (BUILD defaults to build-win)
#
# Environment:
#   JOBS               parallel build and test jobs (default 2)
#   KILN_WIN_TARGETS   what to build (default: all)
#   KILN_WIN_TESTS     a ctest -R regex to run only some tests (default: all)
#
# wine runs with a private prefix under the build folder (BUILD/wine), so the
# tests never touch ~/.wine, and with WINEDEBUG=-all so that only the tests
# speak. Tests labelled `gpu` (they need a Vulkan driver) or `nowine` (they
# need something wine does not do) are left out; docs/windows.md lists them.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-win}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
jobs=${JOBS:-2}
prefix="$build/third_party/prefix"

if [ ! -f "$prefix/.kiln-windows-deps" ]; then
    echo "kiln: no Windows third-party libraries in $prefix: run scripts/windows-deps.sh" >&2
    exit 1
fi

export WINEPREFIX="$build/wine"
export WINEDEBUG=-all
export WINEARCH=win64
# No Mono or Gecko installer prompts: the tests are console programs.
export WINEDLLOVERRIDES="mscoree,mshtml="
unset DISPLAY WAYLAND_DISPLAY

# Make the prefix once, before tests start in parallel: two wine processes
# that both find no prefix would both try to create it.
if [ ! -f "$WINEPREFIX/system.reg" ]; then
    echo "kiln: creating the wine prefix $WINEPREFIX" >&2
    mkdir -p "$WINEPREFIX"
    wine wineboot --init >/dev/null 2>&1 || true
    wineserver -w
    [ -f "$WINEPREFIX/system.reg" ] || {
        echo "kiln: wineboot did not create $WINEPREFIX" >&2
        exit 1
    }
fi

cmake -S "$root" -B "$build" -G Ninja --toolchain "$root/cmake/mingw-w64.cmake" \
    -DKILN_WIN_DEPS="$prefix" -DKILN_WERROR=ON >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target ${KILN_WIN_TARGETS:-all}

# One wineserver kept alive for the whole run saves starting one per test.
# Its helper processes (services.exe, winedevice.exe, ...) are started here
# with no terminal: started by the first test instead, they would inherit
# that test's output pipes and ctest would wait on them until they exit.
wineserver -p
trap 'wineserver -k 2>/dev/null || true' EXIT
wine cmd.exe /c exit </dev/null >/dev/null 2>&1
ctest --test-dir "$build" --output-on-failure -j "$jobs" -LE 'gpu|nowine' \
    ${KILN_WIN_TESTS:+-R "$KILN_WIN_TESTS"}

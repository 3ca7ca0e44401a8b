#!/bin/sh
# Runs every libFuzzer binary in a fuzz build for N seconds each, starting
# from its seed corpus (copied, so the repository's seeds stay small).
# usage: scripts/fuzz.sh BUILD_DIR SECONDS
set -eu
build=$1
seconds=$2
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for bin in "$build"/fuzz/fuzz_*; do
    case "$bin" in *fuzz_replay_*) continue ;; esac
    [ -x "$bin" ] || continue
    name=${bin##*/fuzz_}
    work="$build/fuzz-corpus/$name"
    mkdir -p "$work"
    cp -n "$root/fuzz/corpus/$name"/* "$work"/ 2>/dev/null || true
    echo "== fuzz $name for ${seconds}s"
    if ! "$bin" -max_total_time="$seconds" -print_final_stats=1 "$work" 2>"$build/fuzz-$name.log"; then
        status=1
        tail -40 "$build/fuzz-$name.log"
    fi
    grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$build/fuzz-$name.log" | tail -2
done
exit $status

#!/bin/sh
# A stopped run reports honestly: SIGINT during a prepare (sent to kiln's
# process group, as a terminal does, and twice within the echo window, as
# `timeout -s INT` does) ends it with exit 130 and a report whose first line
# says how far it got ("stopped after N of M programs; run it again to
# resume"), whose counts agree with that line, and which never says "no
# Vulkan" for a phase that did not start; the next run resumes from N. The
# same for kiln start, which stops after the builds running (skipped
# without a Vulkan device).
#
# usage: tests/cli/stop_report.sh PATH/TO/kiln
set -u
kiln=$1
W=$(mktemp -d "${TMPDIR:-/tmp}/kiln-stop-XXXXXX")
trap 'rm -rf "$W"' EXIT
failed=0
passed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
ok() { passed=$((passed + 1)); }

# run_stopped SECONDS ARGS...: kiln ARGS in a process group of its own,
# SIGINT to the group after SECONDS, then once more at once (an echo);
# sets rc, with stdout in $W/out and stderr in $W/err.
run_stopped() {
    delay=$1
    shift
    setsid "$kiln" "$@" >"$W/out" 2>"$W/err" &
    pid=$!
    sleep "$delay"
    kill -INT -- "-$pid" 2>/dev/null
    kill -INT "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
}

total=300
run_stopped 1 prepare --cache "$W/c" --generate $total --no-vulkan --jobs 1
first=$(head -n 1 "$W/out")
n=$(echo "$first" | sed -n "s/^stopped after \([0-9]*\) of $total programs; run it again to resume$/\1/p")
if [ "$rc" -ne 130 ]; then
    fail "prepare stopped by SIGINT: exit $rc, expected 130: $(cat "$W/err")"
elif [ -z "$n" ]; then
    fail "prepare's first line: '$first'"
elif [ "$n" -ge $total ]; then
    fail "prepare stopped after all $n programs: the run was too fast to test"
elif ! grep -q "^  programs   $n translated and stored, 0 already cached, 0 failed$" "$W/out"; then
    fail "the report's counts disagree with its first line ($n): $(sed -n 2p "$W/out")"
elif grep -q "no Vulkan" "$W/out"; then
    fail "a stopped run says 'no Vulkan'"
else
    ok
fi
# The next run resumes.
if "$kiln" prepare --cache "$W/c" --generate $total --no-vulkan >"$W/out" 2>"$W/err" &&
    grep -q "already cached" "$W/out" && grep -q " $n already cached" "$W/out"; then ok; else
    fail "the next run did not resume from $n: $(sed -n 2p "$W/out")"
fi

# kiln start: stopped after the builds running.
"$kiln" prepare --cache "$W/probe" --generate 1 --json >"$W/probe.json" 2>&1
if ! grep -q '"vulkan":true' "$W/probe.json"; then
    echo "skipped: kiln start: no Vulkan device"
else
    run_stopped 1 start --cache "$W/c" --jobs 1
    first=$(head -n 1 "$W/out")
    if [ "$rc" -eq 130 ] && echo "$first" | grep -q "^stopped after [0-9]* of $total pipelines"; then
        ok
    else
        fail "start stopped by SIGINT: exit $rc, first line '$first', $(cat "$W/err")"
    fi
fi
echo "stop report: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

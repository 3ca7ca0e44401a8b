#!/bin/sh
# Two `kiln prepare` runs on one cache folder. The cache has one writer at a
# time: a run that finds the writer lock held exits 1 at once with a line
# saying the cache is held by another writer, and changes nothing; the run
# holding the lock finishes. Afterwards the cache is whole and a later run
# finds every program cached.
#
# 1. deterministic: the lock is held by `flock` while prepare runs;
# 2. a race: two runs started together; each must either finish (exit 0)
#    or be refused as above, and at least one finishes.
#
# usage: tests/reliability/two_prepares.sh PATH/TO/kiln
set -u
kiln=$1
W=$(mktemp -d "${TMPDIR:-/tmp}/kiln-prepares-XXXXXX")
trap 'rm -rf "$W"' EXIT
n=120
failed=0
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

if ! "$kiln" prepare --help >/dev/null 2>&1; then
    echo "SKIP: 'kiln prepare' is not in this build yet; rerun this script when it is"
    exit 0
fi
if ! command -v flock >/dev/null 2>&1; then
    echo "SKIP: no flock(1) on this machine"
    exit 0
fi

snapshot() {
    (cd "$W/c" && find . -type f -exec cksum {} + | LC_ALL=C sort)
}

# 1. A writer holds the lock.
"$kiln" -q prepare --no-vulkan --generate 10 --cache "$W/c" >/dev/null 2>"$W/err0" ||
    fail "the first small prepare failed: $(cat "$W/err0")"
before=$(snapshot)
flock "$W/c/programs.kpc" "$kiln" prepare --no-vulkan --generate 20 --cache "$W/c" \
    >/dev/null 2>"$W/err1"
rc=$?
after=$(snapshot)
[ "$rc" -eq 1 ] || fail "prepare beside a writer: exit $rc, expected 1"
grep -q "held by another writer" "$W/err1" || fail "prepare beside a writer: no clear message"
[ "$before" = "$after" ] || fail "prepare beside a writer changed the cache"
echo "beside a writer: exit $rc, stderr:"
sed 's/^/    /' "$W/err1"

# 2. Two runs at once.
rm -rf "$W/c"
"$kiln" prepare --no-vulkan --generate $n --cache "$W/c" >/dev/null 2>"$W/errA" &
pa=$!
"$kiln" prepare --no-vulkan --generate $n --cache "$W/c" >/dev/null 2>"$W/errB" &
pb=$!
wait $pa
ra=$?
wait $pb
rb=$?
done_runs=0
for r in "A $ra" "B $rb"; do
    set -- $r
    if [ "$2" -eq 0 ]; then
        done_runs=$((done_runs + 1))
    elif [ "$2" -ne 1 ] || ! grep -q "held by another writer" "$W/err$1"; then
        fail "run $1: exit $2: $(cat "$W/err$1")"
    fi
done
[ "$done_runs" -ge 1 ] || fail "neither run finished"
echo "two at once: exits $ra and $rb"

# Afterwards: whole, and a third run finds every program cached.
"$kiln" cache check "$W/c" >"$W/check" 2>&1 || fail "cache check: $(cat "$W/check")"
"$kiln" prepare --no-vulkan --generate $n --cache "$W/c" --json >"$W/third" 2>"$W/err3" ||
    fail "the third run failed: $(cat "$W/err3")"
grep -q "\"cached\": *$n" "$W/third" || fail "the third run did not find all $n programs cached: $(cat "$W/third")"

[ "$failed" -eq 0 ] && echo "two prepares: ok"
[ "$failed" -eq 0 ]

#!/bin/sh
# scripts/plot.py on the reports checked in under tests/fixtures/plot (a
# bench replay with a memory budget and its timeline, three bench stores of
# growing size, one that pruned as it wrote): it writes the four charts in
# both formats, each a real
# PNG or SVG; bad input is one line and exit 2. Skips (exit 77) without
# Debian's python3 and matplotlib.
#
# usage: tests/cli/plot.sh SOURCE_DIR
set -u
src=$1
py=/usr/bin/python3
if ! [ -x $py ] || ! $py -c 'import matplotlib' 2>/dev/null; then
    echo "skipped: no matplotlib for /usr/bin/python3 (apt-get install python3-matplotlib)"
    exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-plot-XXXXXX")
trap 'rm -rf "$out"' EXIT
failed=0
passed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

if ! $py "$src/scripts/plot.py" -o "$out" "$src"/tests/fixtures/plot/*.json >"$out/list" 2>"$out/err"; then
    fail "plot.py failed: $(cat "$out/err")"
fi
for chart in scaling memory open prune; do
    if head -c 8 "$out/$chart.png" 2>/dev/null | od -An -c | grep -q 'P   N   G'; then
        passed=$((passed + 1))
    else
        fail "$chart.png is missing or not a PNG"
    fi
    if grep -q '<svg' "$out/$chart.svg" 2>/dev/null; then
        passed=$((passed + 1))
    else
        fail "$chart.svg is missing or not an SVG"
    fi
done
# The budget line is drawn: its label is text in the SVG.
grep -q 'budget 200 MiB' "$out/memory.svg" && passed=$((passed + 1)) ||
    fail "memory.svg has no budget line"
# The prune chart: its limit line and its cut-offs, as many as the fixture's
# timeline has drops.
cuts=$($py -c 'import json, sys
t = json.load(open(sys.argv[1]))["size_timeline"]
b = t["file_bytes"]
print(sum(1 for i, a in enumerate(t["after_prune"]) if a and i and b[i] < b[i - 1]))' \
    "$src/tests/fixtures/plot/bench-store-prune.json")
if grep -q 'limit 12 MiB' "$out/prune.svg" && grep -q "prune cut-offs ($cuts)" "$out/prune.svg" &&
    [ "$cuts" -ge 3 ]; then
    passed=$((passed + 1))
else
    fail "prune.svg lacks its limit line or its $cuts cut-offs"
fi
printf 'not json\n' >"$out/bad.json"
$py "$src/scripts/plot.py" -o "$out" "$out/bad.json" >/dev/null 2>"$out/err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$out/err")" -eq 1 ]; then
    passed=$((passed + 1))
else
    fail "bad JSON: exit $rc, $(cat "$out/err")"
fi
echo "plot: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

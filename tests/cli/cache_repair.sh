#!/bin/sh
# The repair-check loop and the accounting of the cache commands, as a user
# meets them (issue 30): a cache with a record damaged in the middle and a
# torn tail; `cache check --repair` must leave a cache that `cache check`
# calls whole or, in the same words, names the one command that will, and
# after that command the check says whole. compact and merge put every
# record they read in one category (the categories sum to what was read);
# prune --dry-run writes nothing and lists exactly what the prune drops.
# Plurals: "1 record", "1 cache".
#
# usage: tests/cli/cache_repair.sh PATH/TO/kiln
set -u
case "$1" in
/*) kiln=$1 ;;
*) kiln=$(pwd)/$1 ;;
esac
W=$(mktemp -d "${TMPDIR:-/tmp}/kiln-repair-XXXXXX")
trap 'rm -rf "$W"' EXIT
failed=0

fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

# json KEY FILE: the number KEY has in the one-line JSON object in FILE.
json() {
    sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2"
}

# flip FILE OFFSET: inverts the byte at OFFSET.
flip() {
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "\\$(printf '%03o' $((255 - b)))" |
        dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# cut FILE BYTES: cuts BYTES off the end of FILE.
cut_end() {
    n=$(wc -c <"$1")
    dd if="$1" of="$1.cut" bs=1 count=$((n - $2)) 2>/dev/null && mv "$1.cut" "$1"
}

# result OUT: the check's result line after "not whole: " (the time cut off).
result() {
    sed -n 's/^result *\(.*\) ([0-9.]* s)$/\1/p' "$1" | sed 's/^.*not whole: /not whole: /'
}

D=$W/rc
if ! "$kiln" -q bench store --records 116 --mean-kb 2 --dir "$D" >/dev/null 2>"$W/err"; then
    echo "FAIL: bench store: $(cat "$W/err")"
    exit 1
fi
cp -r "$D" "$W/clean"
flip "$D/programs.kpc" 203000
cut_end "$D/programs.kpc" 1000
cp -r "$D" "$W/rc2"

"$kiln" cache check "$D" >"$W/c1" 2>"$W/e1"
[ $? -eq 1 ] || fail "check of the damaged cache: exit $?, expected 1"
grep -q "^result .*run 'kiln cache compact $D'" "$W/c1" ||
    fail "check does not name compact: $(result "$W/c1")"
grep -q "1 record fails its checksum" "$W/e1" || fail "no singular warning: $(cat "$W/e1")"
grep -q "1 records" "$W/c1" "$W/e1" && fail "'1 records' printed"

"$kiln" cache check --repair "$D" >"$W/r1" 2>"$W/e2"
rc=$?
[ $rc -eq 1 ] || fail "check --repair: exit $rc, expected 1 (a damaged record remains)"
want="not whole: 1 damaged record, left out of the index (reads as missing): run 'kiln cache compact $D' to drop it"
[ "$(result "$W/r1")" = "$want" ] || fail "repair says '$(result "$W/r1")', expected '$want'"

"$kiln" cache check "$D" >"$W/c2" 2>/dev/null
rc=$?
[ $rc -eq 1 ] || fail "check after the repair: exit $rc, expected 1"
[ "$(result "$W/c2")" = "$want" ] || fail "check after the repair says '$(result "$W/c2")'"
grep -q "^index *ok" "$W/c2" || fail "check calls the repaired index $(grep '^index' "$W/c2")"

sum0=$(cksum <"$D/programs.kpx")
"$kiln" cache check --repair "$D" >"$W/r2" 2>/dev/null
[ $? -eq 1 ] || fail "a second repair: exit not 1"
[ "$(result "$W/r2")" = "$want" ] || fail "a second repair says '$(result "$W/r2")'"
[ "$(cksum <"$D/programs.kpx")" = "$sum0" ] || fail "a second repair changed the index"

# The command named: compact, which counts what it left out.
"$kiln" cache compact "$D" --json >"$W/k1" 2>/dev/null || fail "compact failed"
[ "$(json damaged "$W/k1")" = 1 ] || fail "compact left out $(json damaged "$W/k1") damaged, expected 1"
db=$(json damaged_bytes "$W/k1")
[ "${db:-0}" -gt 0 ] || fail "compact counts no damaged bytes"
read_=$(json records_read "$W/k1")
sum=$(($(json records_after "$W/k1") + $(json dropped "$W/k1") + $(json superseded "$W/k1") + \
    $(json damaged "$W/k1")))
[ "$read_" = "$sum" ] || fail "compact read $read_ records, its categories sum to $sum"
"$kiln" cache check "$D" >"$W/c3" 2>"$W/e3" || fail "check after compact: not whole: $(result "$W/c3")"
grep -q "^result *whole" "$W/c3" || fail "check after compact says $(grep '^result' "$W/c3")"

# compact straight away (no repair first) is the one command too.
"$kiln" cache compact "$W/rc2" >"$W/k2" 2>/dev/null || fail "compact of the unrepaired cache failed"
grep -q ", 1 damaged left out" "$W/k2" || fail "compact text: $(cat "$W/k2")"
"$kiln" cache check "$W/rc2" >/dev/null 2>&1 || fail "check after compact without repair: not whole"

# merge: the same 116 keys in two inputs, the later winning.
cp -r "$W/clean" "$W/in1"
cp -r "$W/clean" "$W/in3"
"$kiln" cache merge "$W/m2" "$W/in1" "$W/in3" >"$W/m1" 2>/dev/null || fail "merge failed"
grep -q "232 read: 116 added (0 replacing one in $W/m2), 116 superseded by a later input, 0 already there, 0 damaged left out" "$W/m1" ||
    fail "merge text: $(cat "$W/m1")"
"$kiln" cache merge "$W/m2" "$W/in1" --json >"$W/m2.json" 2>/dev/null || fail "merge again failed"
read_=$(json records_read "$W/m2.json")
sum=$(($(json added "$W/m2.json") + $(json superseded "$W/m2.json") + $(json same "$W/m2.json") + \
    $(json damaged "$W/m2.json")))
[ "$read_" = 116 ] && [ "$read_" = "$sum" ] || fail "merge read $read_, categories sum to $sum"

# prune --dry-run: nothing written (bytes and times), and what it lists is
# what the prune drops.
P=$W/p
cp -r "$W/clean" "$P"
touch -t 200101010000 "$P"/* "$P"
touch -t 200101010001 "$W/ref"
sums=$(cksum "$P"/*)
"$kiln" cache prune --dry-run --max-size 200K "$P" >"$W/d1" 2>"$W/de" || fail "dry run: $(cat "$W/de")"
"$kiln" cache prune --dry-run --max-size 200K "$P" --json >"$W/d1.json" 2>/dev/null ||
    fail "dry run --json failed"
"$kiln" cache prune --dry-run --max-size 64 "$P" >"$W/all" 2>/dev/null || fail "dry run of all"
[ "$(cksum "$P"/*)" = "$sums" ] || fail "a dry run changed the files"
[ -z "$(find "$P" -newer "$W/ref")" ] || fail "a dry run touched $(find "$P" -newer "$W/ref")"
n=$(grep -c '^would drop ' "$W/d1")
[ "$n" -gt 0 ] && [ "$n" = "$(json dropped "$W/d1.json")" ] ||
    fail "dry run lists $n records, its JSON says $(json dropped "$W/d1.json")"
grep -q "^result *would drop $n records" "$W/d1" || fail "dry run result: $(tail -1 "$W/d1")"
grep '^would drop ' "$W/d1" | grep -qv 'over the size (200.0 KiB)$' && fail "a record without its reason"
"$kiln" cache prune --max-size 200K "$P" --json >"$W/p1.json" 2>/dev/null || fail "prune failed"
[ "$(json dropped "$W/p1.json")" = "$n" ] || fail "prune dropped $(json dropped "$W/p1.json"), dry run said $n"
[ "$(json file_bytes_after "$W/p1.json")" = "$(json file_bytes_after "$W/d1.json")" ] ||
    fail "prune left $(json file_bytes_after "$W/p1.json") bytes, dry run said $(json file_bytes_after "$W/d1.json")"
# Every key: listed by the first dry run (and gone) or still there, never both.
"$kiln" cache prune --dry-run --max-size 64 "$P" >"$W/left" 2>/dev/null || fail "dry run after prune"
keys() { sed -n 's/^would drop  \([0-9a-f]*\) .*/\1/p' "$1" | sort; }
keys "$W/d1" >"$W/k.gone"
keys "$W/left" >"$W/k.left"
keys "$W/all" >"$W/k.all"
[ -z "$(comm -12 "$W/k.gone" "$W/k.left")" ] || fail "a listed record was kept"
sort "$W/k.gone" "$W/k.left" | cmp -s - "$W/k.all" || fail "listed + kept is not every record"

# One record, one cache: singular words.
if "$kiln" -q bench store --records 1 --mean-kb 1 --dir "$W/one" >/dev/null 2>&1; then
    "$kiln" cache compact "$W/one" >"$W/o1" 2>&1
    grep -q "nothing to compact: 1 record," "$W/o1" || fail "compact of one: $(cat "$W/o1")"
    "$kiln" cache merge "$W/om" "$W/one" >"$W/o2" 2>&1
    grep -q "(from 1 cache)" "$W/o2" && grep -q "^result *1 record," "$W/o2" ||
        fail "merge of one: $(cat "$W/o2")"
    "$kiln" cache prune --dry-run --max-size 64 "$W/one" >"$W/o3" 2>&1
    grep -q "would drop 1 record " "$W/o3" || fail "dry run of one: $(tail -1 "$W/o3")"
else
    fail "bench store --records 1 failed"
fi

# Plurals and units in the reports of one program: prepare, export, import.
P=$W/plural
if "$kiln" prepare --generate 1 --no-vulkan --cache "$P/c" >"$W/p1" 2>&1 &&
    "$kiln" export foz --cache "$P/c" "$P/a.foz" >"$W/p2" 2>&1 &&
    "$kiln" import foz --cache "$P/i" "$P/a.foz" >"$W/p3" 2>&1; then
    grep -q "^prepared 1 generated program (" "$W/p1" || fail "prepare of one: $(head -1 "$W/p1")"
    grep -q ": 1 pipeline (.* from 1 program; [0-9]* modules\{0,1\}, .* [KM]iB (" "$W/p2" ||
        fail "export of one: $(cat "$W/p2")"
    grep -q ": 1 record; imported .* KiB of SPIR-V as .*iB (" "$W/p3" ||
        fail "import of one: $(tail -1 "$W/p3")"
    if grep -E -q "(^|[^0-9.])1 (records|programs|pipelines|modules)|[0-9] (MB|KB|GB)\b" \
        "$W/p1" "$W/p2" "$W/p3"; then
        fail "a plural after 1, or an SI unit: $(cat "$W/p1" "$W/p2" "$W/p3")"
    fi
else
    fail "prepare, export or import of one program failed: $(cat "$W/p1" "$W/p2" "$W/p3")"
fi

# --reset (prepare, import foz): a stamp mismatch names it; it starts a new
# cache and keeps every old file beside it, byte for byte, also when reset
# twice from the same stamp (.old, then .old.1), and -q keeps it silent.
R=$W/reset
if "$kiln" -q prepare --generate 3 --no-vulkan --cache "$R" &&
    "$kiln" -q export foz --cache "$R" "$W/r.foz"; then
    cp "$R/programs.kpc" "$W/first.kpc"
    "$kiln" import foz --cache "$R" "$W/r.foz" >/dev/null 2>"$W/e1"
    [ $? -eq 2 ] && grep -q "; --reset starts a new cache there, the old files kept beside it" "$W/e1" ||
        fail "import foz on a prepare cache: $(cat "$W/e1")"
    cmp -s "$R/programs.kpc" "$W/first.kpc" || fail "the refused import changed the cache"
    "$kiln" import foz --cache "$R" --reset "$W/r.foz" --json >"$W/j1" 2>"$W/e2" ||
        fail "import foz --reset: $(cat "$W/e2")"
    [ "$(json records "$W/j1")" = 3 ] || fail "import foz --reset stored: $(cat "$W/j1")"
    old=$(ls "$R" | grep '^programs\.kpc\..*\.old$')
    [ -n "$old" ] && cmp -s "$R/$old" "$W/first.kpc" ||
        fail "the old records were not kept aside whole: $(ls "$R")"
    cp "$R/programs.kpc" "$W/second.kpc"
    "$kiln" prepare --generate 3 --no-vulkan --cache "$R" >/dev/null 2>"$W/e3"
    [ $? -eq 2 ] && grep -q -- "--reset starts a new cache" "$W/e3" ||
        fail "prepare on an import cache: $(cat "$W/e3")"
    "$kiln" -q prepare --generate 3 --no-vulkan --cache "$R" --reset >"$W/o4" 2>&1 &&
        [ ! -s "$W/o4" ] || fail "prepare -q --reset: $(cat "$W/o4")"
    "$kiln" -q import foz --cache "$R" --reset "$W/r.foz" >/dev/null 2>&1 ||
        fail "a second import foz --reset"
    "$kiln" -q import foz --cache "$R" --reset "$W/r.foz" >/dev/null 2>&1 ||
        fail "a third import foz --reset"
    n=$(ls "$R" | grep -c '^programs\.kpc\..*\.old')
    [ "$n" -eq 4 ] || fail "four resets, $n records files kept aside: $(ls "$R")"
    kept=0
    for f in "$R"/programs.kpc.*.old*; do
        cmp -s "$f" "$W/first.kpc" && kept=$((kept + 1))
        cmp -s "$f" "$W/second.kpc" && kept=$((kept + 1))
    done
    [ "$kept" -ge 2 ] || fail "the first two caches are not both kept aside"
else
    fail "prepare --generate 3 or its export failed"
fi

if [ "$failed" -ne 0 ]; then
    echo "$failed failed"
    exit 1
fi
echo "all passed"

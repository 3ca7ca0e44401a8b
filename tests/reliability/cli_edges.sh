#!/bin/sh
# Bad input at the command line's edges: every kiln command with a missing
# folder, a folder where a file is expected (tests may run as root, where a
# chmod 000 file still reads), a file of another kind, and flags out of
# range. Each must print exactly one line on stderr naming what is wrong
# and where, exit 2, and change no file (every file under the work folder
# is listed and checksummed before and after). A command this build does
# not have yet is skipped with a note on stdout.
#
# usage: tests/reliability/cli_edges.sh PATH/TO/kiln
set -u
case "$1" in
/*) kiln=$1 ;;
*) kiln=$(pwd)/$1 ;;
esac
if [ ! -x "$kiln" ]; then
    echo "FAIL: no kiln binary at $kiln"
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-edges-XXXXXX")
out=$(mktemp "${TMPDIR:-/tmp}/kiln-edges-out-XXXXXX")
err=$(mktemp "${TMPDIR:-/tmp}/kiln-edges-err-XXXXXX")
trap 'rm -rf "$work" "$out" "$err"' EXIT
W=$work
# The default cache folder, for the commands given none: never the user's.
KILN_CACHE_DIR=$W/missing
export KILN_CACHE_DIR
# A whole Fossilize archive from the fuzz seeds, for the cases where only
# the other argument is bad.
foz=$(cd "$(dirname "$0")/../../fuzz/corpus/foz" && pwd)/triangle.foz
failed=0
passed=0
skipped=0

fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

# Fixtures.
mkdir -p "$W/cwd" "$W/text" "$W/dirkpc/programs.kpc" "$W/spv" "$W/empty"
printf 'not a cache\n' >"$W/text/programs.kpc"
printf 'a plain file\n' >"$W/afile"
printf 'not a fossilize archive\n' >"$W/text.foz"
printf 'not spir-v\n' >"$W/spv/bad.spv"
if ! "$kiln" -q bench store --records 20 --mean-kb 1 --cache "$W/cache" >/dev/null 2>"$err"; then
    fail "bench store could not make the small fixture cache: $(cat "$err")"
elif ! "$kiln" cache check "$W/cache" >/dev/null 2>"$err"; then
    fail "the fixture cache is not whole: $(cat "$err")"
fi

snapshot() {
    (cd "$W" && find . -print | LC_ALL=C sort && find . -type f -exec cksum {} + | LC_ALL=C sort)
}

# section WORDS...: whether this build has the command (its --help works).
have=1
section() {
    if (cd "$W/cwd" && "$kiln" "$@" --help) >/dev/null 2>"$err" ||
        ! grep -q "not available in this build" "$err"; then
        have=1
    else
        have=0
        skipped=$((skipped + 1))
        echo "SKIP: 'kiln $*' is not in this build yet ($(head -1 "$err")); rerun this script when it is"
    fi
}

# expect_code CODE WHAT ARGS...: exit CODE, one stderr line holding WHAT, no file changed.
expect_code() {
    want=$1
    what=$2
    shift 2
    [ "$have" -eq 1 ] || return 0
    before=$(snapshot)
    (cd "$W/cwd" && "$kiln" "$@") >"$out" 2>"$err" </dev/null
    rc=$?
    after=$(snapshot)
    lines=$(wc -l <"$err")
    case_ok=1
    if [ "$rc" -ne "$want" ]; then
        fail "kiln $*: exit $rc, expected $want"
        case_ok=0
    fi
    if [ "$lines" -ne 1 ]; then
        fail "kiln $*: $lines lines on stderr, expected 1"
        case_ok=0
    fi
    if ! grep -qF -- "$what" "$err"; then
        fail "kiln $*: the message does not name '$what'"
        case_ok=0
    fi
    if [ "$before" != "$after" ]; then
        fail "kiln $*: files changed"
        case_ok=0
    fi
    if [ "$case_ok" -eq 0 ]; then
        sed 's/^/    stderr: /' "$err" | head -5
    else
        passed=$((passed + 1))
    fi
}

expect() {
    expect_code 2 "$@"
}

# The cache commands that take one cache folder.
folder_cases() {
    expect "$W/missing" "$@" "$W/missing"
    expect "$W/afile" "$@" "$W/afile"
    expect "$W/text" "$@" "$W/text"
    expect "$W/dirkpc" "$@" "$W/dirkpc"
    expect "--bogus" "$@" --bogus "$W/cache"
}

section cache stats
folder_cases cache stats
expect "$W/missing" cache stats
expect "cache folder" cache stats "$W/cache" "$W/cache"

section cache check
folder_cases cache check
folder_cases cache check --repair
expect "$W/missing" cache check
# A writer holds the cache: repair is refused (a failure, not bad usage).
if [ "$have" -eq 1 ] && command -v flock >/dev/null 2>&1; then
    before=$(snapshot)
    flock "$W/cache/programs.kpc" "$kiln" cache check --repair "$W/cache" >"$out" 2>"$err"
    rc=$?
    after=$(snapshot)
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$err")" -eq 1 ] && grep -q "another writer" "$err" &&
        [ "$before" = "$after" ]; then
        passed=$((passed + 1))
    else
        fail "cache check --repair beside a writer: exit $rc, stderr: $(cat "$err")"
    fi
fi

# bench store --dir replaces only a cache no kiln holds (issue 29, point
# 6): beside a writer it is refused, and the held cache's files stay.
if [ "$have" -eq 1 ] && command -v flock >/dev/null 2>&1; then
    before=$(snapshot)
    flock "$W/cache/programs.kpc" "$kiln" -q bench store --records 5 --mean-kb 1 --dir "$W/cache" \
        >"$out" 2>"$err"
    rc=$?
    after=$(snapshot)
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$err")" -eq 1 ] && grep -q "another kiln holds" "$err" &&
        [ "$before" = "$after" ]; then
        passed=$((passed + 1))
    else
        fail "bench store --dir over a held cache: exit $rc, stderr: $(cat "$err")"
    fi
fi

section topo
expect "$W/missing" topo --sysfs "$W/missing"
expect "$W/afile" topo --sysfs "$W/afile"
expect "$W/text" topo --sysfs "$W/text"
expect "--allowed" topo --allowed abc
expect "--allowed" topo --allowed 3-1
expect "--allowed" topo --allowed 99999999
expect "--sysfs" topo --sysfs
expect "--bogus" topo --bogus

section bench store
expect "--records" bench store --records 0
expect "--records" bench store --records abc
expect "--records" bench store --records 99999999999
expect "--mean-kb" bench store --mean-kb 0
expect "--mean-kb" bench store --mean-kb 70000
expect "--threads" bench store --threads 0
expect "--threads" bench store --threads 17
expect "$W/afile" bench store --records 5 --cache "$W/afile"
expect "$W/text" bench store --records 5 --cache "$W/text"
expect "$W/dirkpc" bench store --records 5 --cache "$W/dirkpc"
expect "--bogus" bench store --bogus
expect "extra" bench store extra

section bench pack
expect "--rounds" bench pack --rounds 0
expect "--generate" bench pack --generate 5
expect "$W/missing" bench pack --corpus "$W/missing"
expect "$W/afile" bench pack --corpus "$W/afile"
expect "--bogus" bench pack --bogus

section bench pages
expect "--rounds" bench pages --rounds 0
expect "--rounds" bench pages --rounds 99999999999999999999999
expect "--ranges" bench pages --ranges 0
expect "--seed" bench pages --seed abc
expect "--bogus" bench pages --bogus

section bench prepare
expect "--bogus" bench prepare --bogus

section prepare
expect "$W/missing" prepare --no-vulkan --corpus "$W/missing" --cache "$W/c1"
expect "$W/afile" prepare --no-vulkan --corpus "$W/afile" --cache "$W/c1"
expect "--generate" prepare --no-vulkan --generate 0 --cache "$W/c1"
expect "--generate" prepare --no-vulkan --generate abc --cache "$W/c1"
expect "--jobs" prepare --no-vulkan --jobs 0 --cache "$W/c1"
expect "--jobs" prepare --no-vulkan --jobs abc --cache "$W/c1"
expect "--device" prepare --device 5000 --cache "$W/c1"
expect "--corpus" prepare --no-vulkan --corpus "$W/spv" --generate 3 --cache "$W/c1"
expect "$W/afile" prepare --no-vulkan --generate 2 --cache "$W/afile"
expect "$W/text" prepare --no-vulkan --generate 2 --cache "$W/text"
expect "$W/dirkpc" prepare --no-vulkan --generate 2 --cache "$W/dirkpc"
expect "--bogus" prepare --bogus
expect "--memory-budget" prepare --no-vulkan --memory-budget 12Q --cache "$W/c1"
expect "--memory-budget" prepare --no-vulkan --memory-budget -5 --cache "$W/c1"
expect "--bogus" prepare --retry-failed --background --bogus
# A number with a blank first is refused, not read past its blank (" -1"
# wrapped to the largest budget); --device has no device to pick without
# Vulkan (issue 29, point 7).
expect "--jobs" prepare --no-vulkan --jobs " 2" --cache "$W/c1"
expect "--memory-budget" prepare --no-vulkan --memory-budget " -1" --cache "$W/c1"
expect "--memory-budget" prepare --no-vulkan --memory-budget " 5M" --cache "$W/c1"
expect "--seed" prepare --no-vulkan --seed " 5" --cache "$W/c1"
expect "--no-vulkan" prepare --no-vulkan --device 1023 --cache "$W/c1"

section start
expect "$W/missing" start --no-vulkan --cache "$W/missing"
expect "$W/afile" start --no-vulkan --cache "$W/afile"
expect "$W/text" start --no-vulkan --cache "$W/text"
expect "$W/dirkpc" start --no-vulkan --cache "$W/dirkpc"
expect "--bogus" start --bogus
expect "--no-vulkan" start --no-vulkan --device 1023 --cache "$W/cache"
expect "--jobs" start --no-vulkan --jobs " 2" --cache "$W/cache"

section import foz
expect "$W/missing.foz" import foz --cache "$W/c1" "$W/missing.foz"
expect "$W/text.foz" import foz --cache "$W/c1" "$W/text.foz"
expect "$W/afile" import foz --cache "$W/afile" "$W/text.foz"
# A good archive beside a missing one: nothing imported, no cache made.
expect "$W/missing.foz" import foz --cache "$W/c1" "$foz" "$W/missing.foz"
# A cache of another stamp is refused, not started over.
expect "$W/cache" import foz --cache "$W/cache" "$foz"
expect "--bogus" import foz --bogus

section cache prune
folder_cases cache prune --max-size 1M
expect "--max-size" cache prune --max-size abc "$W/cache"
expect "--older-than" cache prune --older-than -3 "$W/cache"

section cache compact
folder_cases cache compact

section cache repack
folder_cases cache repack --codec zstd
expect "--codec" cache repack --codec lzma "$W/cache"

section cache merge
# OUT IN...: a bad input folder, or a bad output folder.
expect "$W/missing" cache merge "$W/c2" "$W/missing"
expect "$W/missing" cache merge "$W/c2" "$W/cache" "$W/missing"
expect "$W/text" cache merge "$W/c2" "$W/text"
expect "$W/dirkpc" cache merge "$W/c2" "$W/dirkpc"
expect "$W/afile" cache merge "$W/afile" "$W/cache"
expect "$W/text" cache merge "$W/text" "$W/cache"
expect "--bogus" cache merge --bogus "$W/c2" "$W/cache"

# Paths and values at the edges (issue 17): each refused before anything is
# made, with one line whose reason is not cut off.
long=$(printf '%5000s' '' | tr ' ' a)
ln -s "$W/loop2" "$W/loop1" && ln -s "$W/loop1" "$W/loop2"
section prepare
expect "longer than" prepare --no-vulkan --generate 2 --cache "$W/$long"
expect "longer than" prepare --no-vulkan --generate 2 --cache "$W/deep/er/$long/x"
expect "out of range" prepare --no-vulkan --seed 99999999999999999999 --cache "$W/c1"
expect "not a number" prepare --no-vulkan --seed -1 --cache "$W/c1"
# An option where a path belongs is refused: no folder named --no-vulkan.
expect "'--no-vulkan'" prepare --cache -v --no-vulkan
expect "'--json'" start --cache --json
expect "--corpus" prepare --no-vulkan --corpus --json --cache "$W/c1"
section import foz
expect "'--json'" import foz --cache --json "$foz"
section cache repack
expect "exclude each other" cache repack --codec kiln --dict --no-dict "$W/cache"
section cache merge
expect "longer than" cache merge "$W/$long" "$W/cache"
section topo
expect "--allowed" topo --allowed ''
expect "longer than" topo --sysfs "$W/$long"
expect "$W/loop1" topo --sysfs "$W/loop1"
section bench store
expect "'--json'" bench store --records 5 --cache --json

# --json with a path that is not UTF-8: valid UTF-8 out (U+FFFD), exit 2.
bad=$(printf 'bad\377name')
(cd "$W/cwd" && "$kiln" cache stats "$W/$bad" --json) >"$out" 2>"$err"
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q 'bad\\ufffdname' "$out" || ! grep -q '"ok":false' "$out"; then
    fail "cache stats of a non-UTF-8 path with --json: exit $rc, stdout: $(cat "$out")"
elif command -v iconv >/dev/null 2>&1 && ! iconv -f UTF-8 -t UTF-8 <"$out" >/dev/null 2>&1; then
    fail "cache stats of a non-UTF-8 path with --json: stdout is not UTF-8"
else
    passed=$((passed + 1))
fi

# kiln bench store leaves no temporary folder behind.
mkdir -p "$W/tmp"
if ! TMPDIR="$W/tmp" "$kiln" -q bench store --records 20 --mean-kb 1 >"$out" 2>"$err"; then
    fail "bench store in a temporary folder: $(cat "$err")"
elif [ -n "$(ls -A "$W/tmp")" ]; then
    fail "bench store left behind: $(ls -A "$W/tmp")"
else
    passed=$((passed + 1))
fi

# No command writes over a file of a cache (issue 29, point 6): export foz
# aimed at every file of the cache it reads, by four spellings (the path,
# one through "..", a symbolic and a hard link from outside the folder), at
# a new name in that folder, and into the folder of another cache while a
# writer holds it. Each is refused (exit 2, one line) with every file left
# as it was; the cache is whole after all of it and exports elsewhere.
section export foz
if ! "$kiln" -q import foz --cache "$W/live" "$foz" >/dev/null 2>"$err"; then
    fail "import foz could not make the export fixture: $(cat "$err")"
else
    mkdir -p "$W/links"
    printf 'a ledger\n' >"$W/live/ledger.kpl" # prep's file: every file of the folder counts
    for f in $(ls "$W/live"); do
        ln -s "$W/live/$f" "$W/links/sym-$f"
        ln "$W/live/$f" "$W/links/hard-$f"
        expect "kiln cache" export foz --cache "$W/live" "$W/live/$f"
        expect "kiln cache" export foz --cache "$W/live" "./../live/../live/$f"
        expect "kiln cache" export foz --cache "$W/live" "$W/links/sym-$f"
        expect "kiln cache" export foz --cache "$W/live" "$W/links/hard-$f"
    done
    expect "kiln cache" export foz --cache "$W/live" "$W/live/new.foz"
    holder=
    if command -v flock >/dev/null 2>&1; then
        flock "$W/cache/programs.kpc" sleep 60 &
        holder=$!
        sleep 0.2
    fi
    expect "kiln cache" export foz --cache "$W/live" "$W/cache/programs.kpc"
    expect "kiln cache" export foz --cache "$W/live" "$W/cache/programs.kpx"
    expect "kiln cache" export foz --cache "$W/live" "$W/cache/new.foz"
    [ -n "$holder" ] && kill "$holder" && wait "$holder" 2>/dev/null
    if ! "$kiln" cache check "$W/live" >"$out" 2>"$err" || ! grep -q "records *1 whole" "$out"; then
        fail "the exported cache is not whole after the refused exports: $(cat "$out" "$err")"
    elif ! "$kiln" export foz --cache "$W/live" "$W/links/out.foz" >"$out" 2>"$err" ||
        ! grep -q ": 1 pipeline " "$out"; then
        fail "export foz to a plain path after the refused ones: $(cat "$out" "$err")"
    else
        passed=$((passed + 1))
    fi
fi

# A report that cannot be written is a failure (issue 29, point 7): every
# command checks that stdout took it, --json or text, and says so in one
# line with exit 1.
if [ -w /dev/full ]; then
    for args in "cache stats --json $W/cache" "cache stats $W/cache" "cache check --json $W/cache" \
        "export foz --json --cache $W/live $W/links/full.foz" "topo --json"; do
        # shellcheck disable=SC2086 # the words are the arguments
        (cd "$W/cwd" && "$kiln" $args) >/dev/full 2>"$err" </dev/null
        rc=$?
        if [ "$rc" -ne 1 ] || [ "$(wc -l <"$err")" -ne 1 ] || ! grep -q "cannot write the report" "$err"; then
            fail "kiln $args >/dev/full: exit $rc, stderr: $(cat "$err")"
        else
            passed=$((passed + 1))
        fi
    done
else
    echo "skipped: no /dev/full to write the report to"
fi

# Both dictionary copies gone (issue 29, point 7): kiln start says so once
# and fails, as a writer or --read-only; it does not go on to load records
# nothing can unpack and report ok.
if "$kiln" -q prepare --no-vulkan --generate 30 --dict --cache "$W/dict" >/dev/null 2>"$err"; then
    rm -f "$W/dict/programs.kpd" "$W/dict/programs.kpd2"
    for ro in "" --read-only; do
        # shellcheck disable=SC2086 # $ro is no word or one
        "$kiln" start --no-vulkan $ro --json --cache "$W/dict" >"$out" 2>"$err"
        rc=$?
        said=$(grep -c "cannot be unpacked" "$err")
        if [ "$rc" -ne 1 ] || [ "$said" -ne 1 ] || ! grep -q '"code":"KILN_ECORRUPT"' "$out"; then
            fail "start $ro without either dictionary copy: exit $rc, said $said times: $(cat "$err")"
        else
            passed=$((passed + 1))
        fi
    done
elif grep -q "translator" "$err"; then
    echo "skipped: no GLSL translator in this build for the dictionary fixture"
else
    fail "prepare --dict could not make the dictionary fixture: $(cat "$err")"
fi

# A cache on a read-only mount (issue 29, point 7): a writer is told
# "read-only file system", not "permission denied"; kiln start builds its
# pipelines but cannot save pipelines.vkc, and its report says so
# (pipeline_cache_saved false, a reason) instead of a bare ok. The mount is
# a read-only bind mount in a private mount namespace (unshare -m as root,
# -rm otherwise); where that cannot be made, the case is skipped.
ns="unshare -m"
[ "$(id -u)" -eq 0 ] || ns="unshare -rm"
if ! "$kiln" -q import foz --cache "$W/ro" "$foz" >/dev/null 2>"$err"; then
    fail "import foz could not make the read-only fixture: $(cat "$err")"
elif ! $ns sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1"' sh "$W/ro" \
    >/dev/null 2>&1; then
    echo "skipped: no read-only bind mount here ($ns)"
else
    # shellcheck disable=SC2016 # expanded by the inner shell
    $ns sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" &&
        "$2" -q prepare --no-vulkan --generate 2 --cache "$1" 2>"$3.prep";
        echo $? >"$3.prep.rc"; "$2" start --json --cache "$1" >"$3.start" 2>"$3.start.err";
        echo $? >"$3.start.rc"' sh "$W/ro" "$kiln" "$err"
    if [ "$(cat "$err.prep.rc")" -ne 2 ] || ! grep -q "read-only file system" "$err.prep" ||
        grep -q "permission denied" "$err.prep"; then
        fail "prepare on a read-only mount: exit $(cat "$err.prep.rc"): $(cat "$err.prep")"
    else
        passed=$((passed + 1))
    fi
    if grep -q '"vulkan":false' "$err.start" || grep -qi "vulkan is not available" "$err.start.err"; then
        echo "skipped: no Vulkan device for kiln start on a read-only mount"
    elif [ "$(cat "$err.start.rc")" -ne 0 ] || ! grep -q '"pipelines_built":1' "$err.start" ||
        ! grep -q '"pipeline_cache_saved":false,"pipeline_cache_save_error":"read-only file system"' "$err.start"; then
        fail "start on a read-only mount: exit $(cat "$err.start.rc"): $(cat "$err.start" "$err.start.err")"
    else
        passed=$((passed + 1))
    fi
    rm -f "$err".*
fi

# error.code and error.message come from one value (issue 29, point 7):
# the message is the command's own error line, the one its code goes
# with, not whichever library line came first (a worker's shaderc failure
# beside the code "failed", or beside another worker's KILN_ENOMEM under
# an address-space limit).
mkdir -p "$W/glsl"
printf '#version 450\nlayout(local_size_x = 1) in;\nvoid main() { not glsl; }\n' >"$W/glsl/bad.comp"
"$kiln" prepare --no-vulkan --corpus "$W/glsl" --cache "$W/glslc" --json >"$out" 2>"$err"
rc=$?
own=$(grep '^kiln prepare: ' "$err" | tail -1 | sed 's/^kiln prepare: //')
if grep -q "no GLSL translator\|translator" "$err" && ! grep -q "shaderc failed" "$err"; then
    echo "skipped: no GLSL translator for a program that fails to translate"
elif [ "$rc" -ne 1 ] || [ -z "$own" ] ||
    ! grep -qF "\"error\":{\"code\":\"failed\",\"message\":\"$own\"}" "$out"; then
    fail "prepare with a program that fails: exit $rc, line '$own', error $(grep -o '"error":{[^}]*}' "$out")"
else
    passed=$((passed + 1))
fi

# The fixture cache is still whole after all of the above.
if ! "$kiln" cache check "$W/cache" >/dev/null 2>"$err"; then
    fail "the fixture cache is no longer whole: $(cat "$err")"
fi

echo "cli edges: $passed cases passed, $failed failed, $skipped commands skipped"
[ "$failed" -eq 0 ]

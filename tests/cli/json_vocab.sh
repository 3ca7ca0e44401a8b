#!/bin/sh
# Every kiln command's --json output, on success and on failure, against the
# vocabulary of docs/json.md (checked by json_vocab_check: one valid UTF-8
# JSON object with schema, command, ok, error, cache_dir and a seconds
# object, no key of the old vocabulary). Cheap arguments only: a small
# generated corpus without Vulkan, topo on committed fixtures, benches with
# tiny sizes. A failure must also say why in one line on stderr.
#
# usage: tests/cli/json_vocab.sh PATH/TO/kiln PATH/TO/json_vocab_check SOURCE_DIR
set -u
abs() {
    case "$1" in
    /*) echo "$1" ;;
    *) echo "$(pwd)/$1" ;;
    esac
}
kiln=$(abs "$1")
check=$(abs "$2")
src=$(abs "$3")
W=$(mktemp -d "${TMPDIR:-/tmp}/kiln-json-XXXXXX")
trap 'rm -rf "$W"' EXIT
fx=$src/tests/fixtures/topo
foz=$src/fuzz/corpus/foz/triangle.foz
failed=0
passed=0

fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

# run ok|fail|any ARGS...: kiln ARGS --json; its stdout must pass the check
# (`any`: ok or not, for benches that need shaderc or a Vulkan device); a
# failure must print exactly one line on stderr.
run() {
    want=$1
    shift
    (cd "$W" && "$kiln" "$@" --json) >"$W/out" 2>"$W/err" </dev/null
    rc=$?
    if [ "$want" = any ]; then
        if [ "$rc" -eq 0 ]; then want=ok; else want=fail; fi
    fi
    if [ "$want" = ok ] && [ "$rc" -ne 0 ]; then
        fail "kiln $* --json: exit $rc, expected 0: $(head -3 "$W/err")"
        return
    fi
    if [ "$want" = fail ] && [ "$rc" -eq 0 ]; then
        fail "kiln $* --json: exit 0, expected a failure"
        return
    fi
    if ! "$check" "$want" "$src/docs/json.md" <"$W/out" 2>"$W/why"; then
        fail "kiln $* --json: $(cat "$W/why")"
        sed 's/^/    stdout: /' "$W/out" | head -c 600
        echo
        return
    fi
    if [ "$want" = fail ] && [ "$(wc -l <"$W/err")" -lt 1 ]; then
        fail "kiln $* --json: failed without a line on stderr"
        return
    fi
    passed=$((passed + 1))
}

# Successes, in an order that builds what the next one needs.
run ok prepare --generate 3 --no-vulkan --jobs 1 --cache "$W/c"
run ok start --no-vulkan --cache "$W/c"
run ok start --no-vulkan --recent 2 --cache "$W/c"
run ok start --no-vulkan --cache "$W/top" --layer "$W/c"
run ok cache stats "$W/top" --layer "$W/c" --layer "$W/missing"
run ok bench start --recent 2 --cache "$W/c" --only "$W/c"
run ok cache stats "$W/c"
run ok cache check "$W/c"
run ok cache repack --codec zstd "$W/c"
run ok cache compact "$W/c"
run ok cache prune --max-size 1G "$W/c"
run ok cache prune --dry-run --max-size 1K "$W/c"
run ok cache merge "$W/m" "$W/c"
run ok import foz --cache "$W/f" "$foz"
run ok import foz --cache "$W/f" "$foz" "$foz"
run ok prepare --no-vulkan --jobs 1 --cache "$W/pf" --corpus "$foz" "$foz"
run ok export foz --cache "$W/c" "$W/c.foz"
run ok topo --sysfs "$fx/x3d"
run ok topo --sysfs "$fx/x3d" --all-levels
run ok bench store --records 20 --mean-kb 1
run ok bench store --records 20 --mean-kb 1 --layer
run ok bench store --records 40 --mean-kb 1 --prune-every 10 --max-size 20K
run ok bench store --records 40 --mean-kb 1 --max-size 20K
run ok bench pages --rounds 1 --ranges 16
run any bench pack --generate 20 --rounds 1
# Both of kiln's speeds against zstd -1's: with the dictionary and without.
if grep -q '"ok":true' "$W/out"; then
    for key in unpack_speed_vs_zstd1 nodict_unpack_speed_vs_zstd1 nodict_pack_speed_vs_zstd1; do
        grep -q "\"$key\":" "$W/out" || fail "kiln bench pack --json: no $key"
    done
fi
run any bench prepare --programs 2 --threads 1 --memory-programs 1
run any bench replay --threads 1 "$foz"
run any bench stutter --frames 4 --background 0 --modes sync,async --no-warm-compare "$foz"
run any bench replay --threads 1 --memory-budget 90%,400M "$foz"
# bench peer against a stand-in for fossilize-replay that prints its summary
# (tests/cli/test_cli_peer.c checks the fields' values).
printf '#!/bin/sh\necho "Fossilize INFO: Replayed 3 objects in 1 ms:" >&2\necho "Fossilize INFO:   graphics pipelines:  1" >&2\n' >"$W/standin.sh"
chmod +x "$W/standin.sh"
run any bench peer --peer "$W/standin.sh" --threads 1 "$foz"
run any bench peer --peer "$W/standin.sh" --threads 1 --isolate "$foz"
run any bench replay --threads 1 --isolate "$foz"

# Failures: still one object, with ok false and error {code, message}.
run fail cache stats "$W/missing"
run fail cache check "$W/missing"
run fail cache repack --codec lzma "$W/c"
run fail cache prune --bogus "$W/c"
run fail cache compact
run fail cache merge "$W/m2" "$W/missing"
run fail import foz --cache "$W/f" "$W/missing.foz"
run fail export foz --cache "$W/missing" "$W/x.foz"
run fail export foz --cache "$W/c"
run fail topo --sysfs "$fx/missing_size"
run fail topo --allowed abc
run fail prepare --corpus "$W/missing" --no-vulkan --cache "$W/c3"
run fail start --no-vulkan --cache "$W/missing"
run fail bench store --records 0
run fail bench pages --rounds 0
run fail bench pack --rounds 0
run fail bench prepare --bogus
run fail bench replay "$W/missing.foz"
run fail bench replay --threads 0 "$foz"
run fail bench peer "$foz"
run fail bench peer --peer "$W/missing" --threads 1 "$foz"
run fail bench start --recent 0 --cache "$W/c" --only "$W/c"
run fail bench start --recent 2 --cache "$W/missing" --only "$W/c"
run fail bench stutter --modes bogus "$foz"
run fail bench stutter
run fail bench replay --memory-budget 0% "$foz"
run fail nosuchcommand
run fail cache
run fail cache nosuchcommand
# A path that is not UTF-8 still gives valid JSON (the byte becomes U+FFFD).
bad=$(printf 'bad\377name')
run fail cache stats "$W/$bad"

# The code names the kiln error, or "usage" for the command line.
(cd "$W" && "$kiln" cache stats "$W/missing" --json) >"$W/out" 2>/dev/null
grep -q '"code":"KILN_ENOENT"' "$W/out" || fail "cache stats of a missing folder: $(cat "$W/out")"
(cd "$W" && "$kiln" cache stats --bogus --json) >"$W/out" 2>/dev/null
grep -q '"code":"usage"' "$W/out" || fail "an unknown option: $(cat "$W/out")"
(cd "$W" && "$kiln" cache stats "$W/$bad" --json) >"$W/out" 2>/dev/null
grep -q 'bad\\ufffdname' "$W/out" || fail "the non-UTF-8 byte is not U+FFFD: $(cat "$W/out")"
passed=$((passed + 3))

# --help is text on stdout and exit 0, for every command and group, even
# beside --json.
for words in "" cache import export bench "cache stats" "cache check" "cache repack" \
    "cache prune" "cache compact" "cache merge" "import foz" "export foz" topo prepare start \
    "bench store" "bench pack" "bench prepare" "bench pages" "bench replay" "bench start" "bench stutter"; do
    # shellcheck disable=SC2086 # the words are meant to split
    if ! "$kiln" $words --help >"$W/out" 2>"$W/err"; then
        fail "kiln $words --help: exit $?"
    elif ! grep -q "usage" "$W/out"; then
        fail "kiln $words --help: no usage text on stdout"
    # shellcheck disable=SC2086
    elif ! "$kiln" $words --help --json >"$W/out" 2>&1 || grep -q '"schema"' "$W/out"; then
        fail "kiln $words --help --json: not the help text"
    else
        passed=$((passed + 1))
    fi
done

echo "json vocabulary: $passed cases passed, $failed failed"
[ "$failed" -eq 0 ]

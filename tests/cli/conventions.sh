#!/bin/sh
# The conventions a user expects of a command line, checked on the binary:
# -V / --version / `kiln version`; -h, --help and `kiln help CMD` give one
# text, on stdout, exit 0, for every command; "did you mean" for a mistyped
# command and option (exit 2, one line); and the man page and the shell
# completions name every command and every long option of the binary's own
# --help, so neither falls behind it. The bash completion is also run.
#
# usage: tests/cli/conventions.sh PATH/TO/kiln SOURCE_DIR
set -u
case "$1" in
/*) kiln=$1 ;;
*) kiln=$(pwd)/$1 ;;
esac
src=$(cd "$2" && pwd)
failed=0
passed=0
out=$(mktemp "${TMPDIR:-/tmp}/kiln-conv-XXXXXX")
err=$(mktemp "${TMPDIR:-/tmp}/kiln-conv-err-XXXXXX")
trap 'rm -f "$out" "$out.2" "$err"' EXIT

fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}
ok() { passed=$((passed + 1)); }

# expect CODE PATTERN ARGS...: kiln ARGS exits CODE and its stdout+stderr
# holds PATTERN (a grep -E pattern).
expect() {
    code=$1
    pattern=$2
    shift 2
    "$kiln" "$@" >"$out" 2>"$err"
    rc=$?
    if [ "$rc" -ne "$code" ]; then
        fail "kiln $*: exit $rc, expected $code: $(head -c 300 "$err")"
    elif ! cat "$out" "$err" | grep -Eq -- "$pattern"; then
        fail "kiln $*: no '$pattern' in: $(cat "$out" "$err" | head -c 300)"
    else
        ok
    fi
}

version=$("$kiln" --version)
for v in -V version; do
    if [ "$("$kiln" $v 2>&1)" = "$version" ]; then ok; else fail "kiln $v differs from --version"; fi
done
case $version in "kiln "[0-9]*) ok ;; *) fail "--version printed '$version'" ;; esac

# The commands, from the top-level help.
commands=$("$kiln" --help | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z]*\( [a-z]*\)\?\)  .*/\1/p' |
    sed 's/ *$//')
[ -n "$commands" ] || fail "no command in kiln --help"
echo "$commands" | while IFS= read -r c; do
    # shellcheck disable=SC2086
    "$kiln" $c --help >"$out" 2>"$err" || echo "FAIL: kiln $c --help exited $?"
    # shellcheck disable=SC2086
    "$kiln" $c -h >"$out.2" 2>>"$err" || echo "FAIL: kiln $c -h exited $?"
    cmp -s "$out" "$out.2" || echo "FAIL: kiln $c -h differs from --help"
    # shellcheck disable=SC2086
    "$kiln" help $c >"$out.2" 2>>"$err" || echo "FAIL: kiln help $c exited $?"
    cmp -s "$out" "$out.2" || echo "FAIL: kiln help $c differs from --help"
    grep -q "^usage: kiln $c" "$out" || echo "FAIL: kiln $c --help does not start with its usage"
    # Every long option of the command is in the man page.
    for o in $(grep -o -- '--[a-z][a-z0-9-]*' "$out" | sort -u); do
        roff=$(echo "$o" | sed 's/-/\\\\-/g')
        grep -q -- "$roff" "$src/docs/man/kiln.1" || echo "FAIL: kiln.1 does not name $c $o"
    done
    first=${c%% *}
    for f in kiln.bash _kiln kiln.fish; do
        grep -q -- "$first" "$src/tools/kiln/completions/$f" ||
            echo "FAIL: completions/$f does not name the command $first"
    done
    case $c in
    *" "*)
        for f in kiln.bash _kiln kiln.fish; do
            grep -q -- "${c#* }" "$src/tools/kiln/completions/$f" ||
                echo "FAIL: completions/$f does not name $c"
        done
        ;;
    esac
    grep -Eq "^\.BI? \"?$c( |\"|\$)" "$src/docs/man/kiln.1" || echo "FAIL: kiln.1 has no entry for $c"
done >"$out.fails"
if [ -s "$out.fails" ]; then
    cat "$out.fails"
    failed=$((failed + $(wc -l <"$out.fails")))
else
    ok
fi
rm -f "$out.fails"

# Did you mean.
expect 2 "unknown command 'prepar'; did you mean 'prepare'\\?" prepar
expect 2 "did you mean 'cache'\\?" cahce stats
expect 2 "unknown option '--cahce'; did you mean '--cache'\\?" prepare --cahce x
expect 2 "did you mean '--repair'\\?" cache check --repiar x
expect 2 "^kiln: unknown command 'zzz' \\(try" zzz
if "$kiln" prepar 2>&1 >/dev/null | awk 'END { exit NR == 1 ? 0 : 1 }'; then ok; else
    fail "kiln prepar printed more than one line"
fi

# The default cache folder: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln
# (absolute only), else $HOME/.cache/kiln; the cache commands take the
# folder as DIR or --cache DIR alike. Each run names the folder it would
# open (none exists: exit 2).
d=$(mktemp -d "${TMPDIR:-/tmp}/kiln-conv-dir-XXXXXX")
default_is() {
    want=$1
    shift
    env "$@" "$kiln" cache stats >"$out" 2>"$err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q "^kiln cache stats: $want: cannot open the cache" "$err"; then
        ok
    else
        fail "default folder with $*: exit $rc, $(cat "$err"), expected $want"
    fi
}
default_is "$d/own" KILN_CACHE_DIR="$d/own" XDG_CACHE_HOME="$d/xdg" HOME="$d/home"
default_is "$d/xdg/kiln" -u KILN_CACHE_DIR XDG_CACHE_HOME="$d/xdg" HOME="$d/home"
default_is "$d/home/.cache/kiln" -u KILN_CACHE_DIR -u XDG_CACHE_HOME HOME="$d/home"
default_is "$d/home/.cache/kiln" -u KILN_CACHE_DIR XDG_CACHE_HOME=relative HOME="$d/home"
env -u KILN_CACHE_DIR -u XDG_CACHE_HOME -u HOME -u LOCALAPPDATA "$kiln" cache stats >"$out" 2>"$err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$err")" -eq 1 ] && grep -q "give --cache DIR" "$err"; then ok; else
    fail "no default folder at all: exit $rc, $(cat "$err")"
fi
for c in "cache stats" "cache check" "cache compact" "cache prune --max-size 1M" \
    "cache repack --codec zstd"; do
    # shellcheck disable=SC2086
    KILN_CACHE_DIR="$d/own" "$kiln" $c --cache "$d/given" >"$out" 2>"$err"
    if grep -q "$d/given" "$err"; then ok; else fail "kiln $c --cache DIR: $(cat "$err")"; fi
    # shellcheck disable=SC2086
    KILN_CACHE_DIR="$d/own" "$kiln" $c --cache "$d/given" "$d/given" >"$out" 2>"$err"
    if [ $? -eq 2 ] && grep -q "expected one cache folder" "$err"; then ok; else
        fail "kiln $c with DIR and --cache DIR: $(cat "$err")"
    fi
done
for c in "import foz $d/none.foz" "export foz $d/out.foz"; do
    # shellcheck disable=SC2086
    KILN_CACHE_DIR="$d/own" "$kiln" $c >"$out" 2>"$err"
    if [ $? -eq 2 ] && ! grep -q "required" "$err"; then ok; else
        fail "kiln $c without --cache: $(cat "$err")"
    fi
done
rm -rf "$d"

# Old spellings still work, with one line naming the new one.
d=$(mktemp -d "${TMPDIR:-/tmp}/kiln-conv-old-XXXXXX")
"$kiln" bench store --records 20 --mean-kb 1 --dir "$d/c" >"$out" 2>"$err"
rc=$?
if [ $rc -eq 0 ] && [ -s "$d/c/programs.kpc" ] && [ "$(grep -c "old spelling" "$err")" -eq 1 ] &&
    grep -q -- "--dir is an old spelling: use --cache" "$err"; then ok; else
    fail "bench store --dir: exit $rc, $(cat "$err")"
fi
# The same warning twice: shown once, and counted at the end.
"$kiln" bench store --records 20 --mean-kb 1 --dir "$d/c2" --dir "$d/c2" >"$out" 2>"$err"
if [ "$(grep -c "old spelling" "$err")" -eq 1 ] &&
    grep -q "^kiln: 1 repeated warning not shown" "$err"; then ok; else
    fail "a warning given twice: $(cat "$err")"
fi
"$kiln" bench prepare --programs 0 >"$out" 2>"$err"
if [ $? -eq 2 ] && grep -q -- "--programs is an old spelling: use --generate" "$err" &&
    grep -q -- "--generate: expected" "$err"; then ok; else
    fail "bench prepare --programs: $(cat "$err")"
fi
"$kiln" -q bench pack --generated 5 >"$out" 2>"$err"
if [ $? -eq 2 ] && ! grep -q "old spelling" "$err"; then ok; else
    fail "bench pack -q --generated: $(cat "$err")"
fi
rm -rf "$d"

# -q: nothing on stdout or stderr on success, for work commands; a report
# command (cache stats) still prints what was asked for.
d=$(mktemp -d "${TMPDIR:-/tmp}/kiln-conv-q-XXXXXX")
if "$kiln" -q prepare --cache "$d/c" --generate 2 --no-vulkan >"$out" 2>"$err" &&
    [ ! -s "$out" ] && [ ! -s "$err" ]; then ok; else
    fail "-q prepare printed: $(cat "$out" "$err" | head -c 300)"
fi
if "$kiln" -q start --cache "$d/c" --no-vulkan >"$out" 2>"$err" && [ ! -s "$out" ] &&
    [ ! -s "$err" ]; then ok; else
    fail "-q start printed: $(cat "$out" "$err" | head -c 300)"
fi
if "$kiln" -q cache stats "$d/c" >"$out" 2>"$err" && grep -q "^records" "$out"; then ok; else
    fail "-q cache stats printed no report"
fi
"$kiln" -q start --cache "$d/none" >"$out" 2>"$err"
if [ $? -eq 2 ] && [ "$(wc -l <"$err")" -eq 1 ]; then ok; else fail "-q start on no cache: $(cat "$err")"; fi
rm -rf "$d"

# Errors that name the next step.
d=$(mktemp -d "${TMPDIR:-/tmp}/kiln-conv-hint-XXXXXX")
mkdir -p "$d/foz" "$d/empty" "$d/cwd"
cp "$src/fuzz/corpus/foz/triangle.foz" "$d/foz/"
"$kiln" prepare --corpus "$d/foz" --cache "$d/c" --no-vulkan >"$out" 2>"$err"
if [ $? -eq 2 ] && grep -q "1 Fossilize archive: name them (--corpus $d/foz/\*.foz)" "$err"; then ok
else fail "prepare on a folder of archives: $(cat "$err")"; fi
(cd "$d/cwd" && env -u KILN_CORPUS "$kiln" bench pack >"$out" 2>"$err")
if [ $? -eq 2 ] && grep -q -- "--generate N" "$err"; then ok; else
    fail "bench pack without a corpus: $(cat "$err")"
fi
"$kiln" prepare --generate 2 --no-vulkan --memory-budget 1M --cache "$d/c" --json >"$out" 2>"$err"
if grep -q "memory budget of 1.0 MiB was not held" "$err" && grep -q '"within_budget":false' "$out"
then ok; else fail "a budget not held: $(cat "$err")"; fi
rm -rf "$d"

# Progress on a pseudo-terminal (util-linux's script): a repack and a merge
# draw their bar to the end; cache check, export foz and import foz too (by
# bytes read, by bytes read, by pipelines); -q draws none.
if command -v script >/dev/null 2>&1; then
    d=$(mktemp -d "${TMPDIR:-/tmp}/kiln-conv-pty-XXXXXX")
    "$kiln" -q bench store --records 2000 --mean-kb 2 --cache "$d/c" >/dev/null 2>&1
    for c in "cache repack $d/c --codec zstd" "cache merge $d/m $d/c"; do
        script -qec "$kiln $c" /dev/null >"$out" 2>&1
        verb=${c#cache }
        verb=${verb%% *}
        if tr '\r' '\n' <"$out" | grep -q "^$verb *\[#*\] 2000/2000"; then ok; else
            fail "kiln $c on a terminal drew no bar: $(tr '\r' '\n' <"$out" | head -c 300)"
        fi
    done
    # check reads the whole records file: its bar (in bytes) ends full.
    script -qec "$kiln cache check $d/c" /dev/null >"$out" 2>&1
    if tr '\r' '\n' <"$out" | grep -aq "^check *\[#*\] \([0-9.]* [KMG]iB\)/\1 "; then ok; else
        fail "kiln cache check on a terminal drew no whole bar: $(tr '\r' '\n' <"$out" | head -c 300)"
    fi
    # export foz draws the bytes it read, import foz the pipelines it stored.
    "$kiln" -q prepare --generate 12 --no-vulkan --cache "$d/p" >/dev/null 2>&1
    script -qec "$kiln export foz --cache $d/p $d/a.foz" /dev/null >"$out" 2>&1
    if tr '\r' '\n' <"$out" | grep -aq "^export *\[[#.]*\] [0-9.]* [KMG]*i*B/"; then ok; else
        fail "kiln export foz on a terminal drew no bar: $(tr '\r' '\n' <"$out" | head -c 300)"
    fi
    script -qec "$kiln import foz --cache $d/i $d/a.foz" /dev/null >"$out" 2>&1
    if tr '\r' '\n' <"$out" | grep -aq "^import *\[#*\] 12/12"; then ok; else
        fail "kiln import foz on a terminal drew no bar: $(tr '\r' '\n' <"$out" | head -c 300)"
    fi
    # -q draws no bar.
    script -qec "$kiln -q cache check $d/c" /dev/null >"$out" 2>&1
    if ! grep -aq "\[" "$out"; then ok; else fail "kiln -q cache check drew a bar"; fi
    rm -rf "$d"
fi

# The bash completion, run as bash would.
if command -v bash >/dev/null 2>&1; then
    kdir=$(dirname "$kiln")
    got=$(PATH="$kdir:$PATH" bash -c '. "$1"; t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1));
        COMPREPLY=(); _kiln; echo "${COMPREPLY[*]}"; }
        t kiln pre; t kiln cache ""; t kiln cache check --re; t kiln -v prepare --ca' sh \
        "$src/tools/kiln/completions/kiln.bash")
    want="prepare
stats check repack prune compact merge
--repair
--cache"
    if [ "$got" = "$want" ]; then ok; else fail "bash completion gave: $got"; fi
fi
for sh in zsh fish; do
    if command -v $sh >/dev/null 2>&1; then
        f=$src/tools/kiln/completions/_kiln
        [ $sh = fish ] && f=$src/tools/kiln/completions/kiln.fish
        if $sh -n "$f"; then ok; else fail "$f does not parse in $sh"; fi
    fi
done
if command -v groff >/dev/null 2>&1; then
    if groff -man -Tutf8 -ww "$src/docs/man/kiln.1" 2>"$err" >/dev/null && [ ! -s "$err" ]; then
        ok
    else
        fail "kiln.1 has groff warnings: $(head -c 300 "$err")"
    fi
fi

echo "conventions: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

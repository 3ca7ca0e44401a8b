#!/bin/sh
# abi.check: the built libkiln.so against the ABI baseline committed in
# abi/ (docs/abi.md, "How CI checks").
#
#   1. the baseline is the built SONAME's (abi/libkiln.so.N.abi), the only
#      one there, and CHANGELOG.md names that SONAME;
#   2. abidiff over the public headers finds no change but those
#      abi/growable.abignore lets through (a field appended to a struct
#      that may grow) and added functions.
#
# An incompatible change fails, unless the same commit bumped SOVERSION,
# wrote the new baseline (scripts/abi-baseline.sh) and said so in
# CHANGELOG.md. Without abidiff (Debian's abigail-tools, which
# scripts/deps.sh test installs) or without debug info in the library it
# prints one "skipped: <why>" line and exits 77.
#
# usage: abi_check.sh LIBKILN_SO SOURCE_DIR [BASELINE_DIR]
set -u
lib=${1:?usage: abi_check.sh LIBKILN_SO SOURCE_DIR [BASELINE_DIR]}
root=${2:?usage: abi_check.sh LIBKILN_SO SOURCE_DIR [BASELINE_DIR]}
base_dir=${3:-$root/abi}

for tool in abidiff readelf; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "skipped: $tool is not installed (abigail-tools, binutils; scripts/deps.sh test)"
        exit 77
    }
done
readelf -S "$lib" 2>/dev/null | grep -q '\.debug_info' || {
    echo "skipped: $lib has no debug info for abidiff to read (build with -g)"
    exit 77
}
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ -n "$soname" ] || { echo "abi.check: $lib has no SONAME"; exit 1; }
baseline="$base_dir/$soname.abi"
if [ ! -f "$baseline" ]; then
    echo "abi.check: no baseline ${baseline#$root/} for the built $soname: run" \
        "scripts/abi-baseline.sh, commit it with the SONAME bump and say so in CHANGELOG.md"
    exit 1
fi
for other in "$base_dir"/libkiln.so.*.abi; do
    [ "$other" = "$baseline" ] && continue
    echo "abi.check: ${other#$root/} is a baseline of another SONAME: remove it (the" \
        "baseline is $soname's)"
    exit 1
done
grep -q "$soname" "$root/CHANGELOG.md" || {
    echo "abi.check: CHANGELOG.md does not name $soname: say why the SONAME changed"
    exit 1
}
report=$(abidiff --headers-dir2 "$root/include" --drop-private-types --no-added-syms \
    --suppressions "$base_dir/growable.abignore" "$baseline" "$lib" 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
    printf '%s\n' "$report"
    if [ $((rc & 3)) -ne 0 ]; then
        echo "abi.check: abidiff failed (exit $rc)"
    else
        echo "abi.check: libkiln's ABI changed incompatibly against ${baseline#$root/}" \
            "(above): undo it, or bump SOVERSION in src/CMakeLists.txt, run" \
            "scripts/abi-baseline.sh and say so in CHANGELOG.md (docs/abi.md)"
    fi
    exit 1
fi
echo "abi.check: $soname matches ${baseline#$root/} (growth within the rules only)"

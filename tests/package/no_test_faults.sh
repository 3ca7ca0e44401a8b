#!/bin/sh
# usage: no_test_faults.sh NM PREFIX [FAULTS_EXE]
# Fails if the kiln installed in PREFIX (libkiln.so, libkiln.a, bin/kiln)
# holds any of the test-only faults of src/prep/prep_fault.c: the name of
# the variable they read ($KILN_TEST_FAULT) among its bytes, or a symbol or
# archive member of prep_fault.c (nm -a). FAULTS_EXE, the test build's
# kiln-faults, is the negative control: the same check must find them there.
set -u
nm=${1:?usage: no_test_faults.sh NM PREFIX [FAULTS_EXE]}
prefix=${2:?}
faults_exe=${3:-}

# faults FILE: prints what of the faults FILE holds (nothing: none).
faults() {
    if grep -a -q -F KILN_TEST_FAULT "$1"; then
        echo "$1: holds the string KILN_TEST_FAULT"
    fi
    "$nm" -a "$1" 2>/dev/null | grep -E 'prep_fault' | sed "s|^|$1: nm: |" | head -3
}

files=$(find "$prefix" \( -name 'libkiln.so*' -o -name 'libkiln.a' -o -path '*/bin/kiln' \) -type f)
n=$(printf '%s\n' "$files" | grep -c .)
if [ "$n" -lt 3 ]; then
    echo "no_test_faults: expected libkiln.so, libkiln.a and bin/kiln under $prefix, found:"
    printf '%s\n' "$files"
    exit 1
fi
bad=0
for f in $files; do
    out=$(faults "$f")
    if [ -n "$out" ]; then
        printf '%s\n' "$out"
        bad=$((bad + 1))
    fi
done
if [ "$bad" -gt 0 ]; then
    echo "no_test_faults: $bad installed file(s) hold the test-only faults"
    exit 1
fi
if [ -n "$faults_exe" ]; then
    if [ -z "$(faults "$faults_exe")" ]; then
        echo "no_test_faults: the negative control finds no fault in $faults_exe"
        exit 1
    fi
    echo "no_test_faults: the negative control finds them in $(basename "$faults_exe")"
fi
echo "no_test_faults: none in the $n installed files"

#!/bin/sh
# check_core_symbols.sh NM EXPECT LIBRARY... - reads every symbol (defined
# and undefined) of the libraries with nm and looks for shaderc, glslang,
# json-c and zlib. EXPECT is "none" for the core (libkiln: no symbol of
# them may be there, docs/design.md) or "some" for the negative control
# (a tool library that does use them must show them). EXPECT "notools"
# holds libkiln as a whole to no shaderc or glslang symbol: since the
# Fossilize module moved into the core (src/foz), libkiln links zlib and
# json-c, but only through that module (the other module archives are
# checked with "none").
#
# EXPECT "prefix": every global symbol the libraries define (nm -g, and
# nm -D for a shared library) must be kiln's, kiln_... or kiln__..., or on
# the allow list below; a third-party name defined in libkiln.a clashes
# with a client that links that library too (SPIRV-Tools' libspirv.h
# defines kDefaultMaxIdBound in every C file that includes it). EXPECT
# "stray" is its negative control: some such name must be found.
set -u
nm=${1:?usage: check_core_symbols.sh NM none|notools|some|prefix|stray LIBRARY...}
expect=${2:?}
shift 2
[ $# -gt 0 ] || { echo "check_core_symbols: no library given"; exit 2; }

# Defined globals that are not kiln's names but may be there, each with
# its reason: i386's PIC helpers (__x86.get_pc_thunk.*, hidden, emitted by
# the compiler in every object and merged), and GCC AddressSanitizer's ODR
# indicator of each of kiln's own globals (__odr_asan.kiln_..., in the
# sanitizer builds only), and the version node of the shared library's
# symbols (KILN_2, an absolute symbol the version script makes; docs/abi.md).
allow='^__x86\.get_pc_thunk\.|^__odr_asan\.kiln_|^KILN_[0-9.]+$'

if [ "$expect" = prefix ] || [ "$expect" = stray ]; then
    found=$(for lib in "$@"; do
        {
            "$nm" -g --defined-only "$lib" 2>/dev/null
            case $lib in *.so | *.so.*) "$nm" -D --defined-only "$lib" 2>/dev/null ;; esac
        } | awk 'NF >= 2 && $(NF-1) ~ /^[A-Za-z]$/ { print $NF }' |
            grep -v -E '^kiln_' | grep -v -E "$allow" | sed "s|^|$(basename "$lib"): |"
    done | sort -u)
    n=$(printf '%s' "$found" | grep -c . || true)
    if [ "$expect" = prefix ]; then
        if [ "$n" -gt 0 ]; then
            printf '%s\n' "$found" | head -20
            echo "check_core_symbols: $n defined global symbol(s) not named kiln_ in the core"
            exit 1
        fi
        echo "check_core_symbols: every defined global of $# core librar(ies) is named kiln_"
    else
        if [ "$n" -eq 0 ]; then
            echo "check_core_symbols: the negative control found no stray global in $*"
            exit 1
        fi
        echo "check_core_symbols: the negative control finds $n stray global(s), e.g. $(printf '%s\n' "$found" | head -1)"
    fi
    exit 0
fi
pattern='shaderc_|glslang|^_?json_|^_?(inflate|deflate)[A-Za-z0-9_]*$|^_?(crc32|adler32|zlibVersion|uncompress|compress|compress2|gzopen|gzread|gzwrite)$'
what="shaderc, glslang, json-c or zlib"
if [ "$expect" = notools ]; then
    pattern='shaderc_|glslang'
    what="shaderc or glslang"
    expect=none
fi
found=$(for lib in "$@"; do
    "$nm" "$lib" 2>/dev/null | awk 'NF >= 2 { print $NF }' | grep -E "$pattern" |
        sed "s|^|$(basename "$lib"): |"
done | sort -u)
n=$(printf '%s' "$found" | grep -c . || true)
if [ "$expect" = none ]; then
    if [ "$n" -gt 0 ]; then
        printf '%s\n' "$found" | head -20
        echo "check_core_symbols: $n symbol(s) of $what in the core"
        exit 1
    fi
    echo "check_core_symbols: no $what symbol in $# core librar(ies)"
else
    if [ "$n" -eq 0 ]; then
        echo "check_core_symbols: the negative control found nothing in $*"
        exit 1
    fi
    echo "check_core_symbols: the negative control finds $n such symbol(s), e.g. $(printf '%s\n' "$found" | head -1)"
fi
exit 0

#!/bin/sh
# check_core_symbols.sh NM EXPECT LIBRARY... - reads every symbol (defined
# and undefined) of the libraries with nm and looks for shaderc, glslang,
# json-c and zlib. EXPECT is "none" for the core (libkiln: no symbol of
# them may be there, docs/design.md) or "some" for the negative control
# (a tool library that does use them must show them).
set -u
nm=${1:?usage: check_core_symbols.sh NM none|some LIBRARY...}
expect=${2:?}
shift 2
[ $# -gt 0 ] || { echo "check_core_symbols: no library given"; exit 2; }
pattern='shaderc_|glslang|^_?json_|^_?(inflate|deflate)[A-Za-z0-9_]*$|^_?(crc32|adler32|zlibVersion|uncompress|compress|compress2|gzopen|gzread|gzwrite)$'
found=$(for lib in "$@"; do
    "$nm" "$lib" 2>/dev/null | awk 'NF >= 2 { print $NF }' | grep -E "$pattern" |
        sed "s|^|$(basename "$lib"): |"
done | sort -u)
n=$(printf '%s' "$found" | grep -c . || true)
if [ "$expect" = none ]; then
    if [ "$n" -gt 0 ]; then
        printf '%s\n' "$found" | head -20
        echo "check_core_symbols: $n symbol(s) of shaderc, glslang, json-c or zlib in the core"
        exit 1
    fi
    echo "check_core_symbols: no shaderc, glslang, json-c or zlib symbol in $# core librar(ies)"
else
    if [ "$n" -eq 0 ]; then
        echo "check_core_symbols: the negative control found nothing in $*"
        exit 1
    fi
    echo "check_core_symbols: the negative control finds $n such symbol(s), e.g. $(printf '%s\n' "$found" | head -1)"
fi
exit 0

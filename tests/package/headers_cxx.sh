#!/bin/sh
# usage: headers_cxx.sh CXX INCLUDE BUILD_INCLUDE
# Compiles every public header alone as C++ (g++/clang++ -fsyntax-only),
# then one file that writes `T s{};` for every struct the headers define:
# in C++ a function of the same name (kiln_cache_stats before 0.2) hides
# the struct, and that line does not compile. Exit 77 (skipped) without a
# C++ compiler.
cxx=$1 inc=$2 binc=$3
if [ -z "$cxx" ] || ! command -v "$cxx" >/dev/null 2>&1; then
    echo "skipped: no C++ compiler"
    exit 77
fi
failed=0
for h in "$inc"/kiln.h "$inc"/kiln/*.h; do
    name=${h#"$inc"/}
    if printf '#include "%s"\nint main() { return 0; }\n' "$name" |
        "$cxx" -x c++ -std=c++11 -Wall -Wextra -pedantic -Werror -fsyntax-only \
            -I"$inc" -I"$binc" -; then
        echo "ok   $name"
    else
        echo "FAIL $name"
        failed=1
    fi
done
# Every struct with a body in the public headers, by its bare name.
structs=$(cat "$inc"/kiln.h "$inc"/kiln/*.h | grep -o -E 'struct kiln_[a-z0-9_]+ *[{]' |
    sed -E 's/struct (kiln_[a-z0-9_]+).*/\1/' | sort -u)
n=$(printf '%s\n' "$structs" | grep -c .)
if [ "$n" -eq 0 ]; then
    echo "FAIL no struct found in $inc"
    exit 1
fi
if {
    printf '#include "kiln.h"\nint main() {\n'
    for t in $structs; do
        printf '    %s s_%s{};\n    (void)s_%s;\n' "$t" "$t" "$t"
    done
    printf '    return 0;\n}\n'
} | "$cxx" -x c++ -std=c++11 -Wall -Wextra -pedantic -Werror -fsyntax-only \
    -I"$inc" -I"$binc" -; then
    echo "ok   T s{}; for each of $n structs"
else
    echo "FAIL T s{}; for some of the $n structs (a function hides the struct?)"
    failed=1
fi
exit $failed

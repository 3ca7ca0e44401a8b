#!/bin/sh
# usage: headers_cxx.sh CXX INCLUDE BUILD_INCLUDE
# Compiles every public header alone as C++ (g++/clang++ -fsyntax-only);
# exit 77 (skipped) without a C++ compiler.
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
exit $failed

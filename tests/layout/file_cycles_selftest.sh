#!/bin/sh
# file_cycles_selftest.sh SCRIPT NM CC - the negative control of
# layout.file_cycles: two objects of one module that call each other must
# fail the check; the same module with one call taken out must pass it.
set -u
script=${1:?usage: file_cycles_selftest.sh SCRIPT NM CC}
nm=${2:?usage: file_cycles_selftest.sh SCRIPT NM CC}
cc=${3:?usage: file_cycles_selftest.sh SCRIPT NM CC}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/m" "$tmp/obj/m"
: > "$tmp/src/m/CMakeLists.txt"
printf 'int b(void);\nint a(void) { return b() + 1; }\n' > "$tmp/a.c"
printf 'int a(void);\nint b(void) { return 2; }\nint c(void) { return a(); }\n' > "$tmp/b.c"
"$cc" -c "$tmp/a.c" -o "$tmp/obj/m/a.c.o" && "$cc" -c "$tmp/b.c" -o "$tmp/obj/m/b.c.o" || exit 2
if sh "$script" "$nm" "$tmp/src" "$tmp/obj" >/dev/null; then
    echo "file_cycles_selftest: a.c and b.c calling each other were not caught"
    exit 1
fi
printf 'int b(void) { return 2; }\n' > "$tmp/b.c"
"$cc" -c "$tmp/b.c" -o "$tmp/obj/m/b.c.o" || exit 2
if ! sh "$script" "$nm" "$tmp/src" "$tmp/obj" >/dev/null; then
    echo "file_cycles_selftest: a one-way call was refused"
    exit 1
fi
echo "file_cycles_selftest: a call both ways is caught, one way passes"

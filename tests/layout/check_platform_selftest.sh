#!/bin/sh
# check_platform_selftest.sh CHECK - check_platform.sh's negative control:
# a portable file with #ifdef _WIN32 is refused and names the line; the
# same code in a _win.c file (and the word in a comment) passes.
set -u
check=${1:?usage: check_platform_selftest.sh CHECK}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/m"
printf '/* _WIN32 here is prose */\nint f(void)\n{\n#ifdef _WIN32\n    return 1;\n#endif\n    return 0;\n}\n' > "$tmp/src/m/m.c"
out=$(sh "$check" "$tmp" src) && { echo "an #ifdef _WIN32 in a portable file passed"; exit 1; }
echo "$out" | grep -q '^src/m/m.c:4: names _WIN32' || { echo "unexpected: $out"; exit 1; }
mv "$tmp/src/m/m.c" "$tmp/src/m/m_win.c"
printf '/* _WIN32 here is prose */\nint f(void);\n' > "$tmp/src/m/m.c"
out=$(sh "$check" "$tmp" src) || { echo "a platform file was refused: $out"; exit 1; }
echo "ok"

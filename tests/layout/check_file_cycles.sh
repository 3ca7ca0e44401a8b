#!/bin/sh
# check_file_cycles.sh NM SRCDIR OBJDIR - no two files of one core module
# call each other both ways (docs/design.md). SRCDIR is the source tree's
# src/ (each folder with a CMakeLists.txt is a module), OBJDIR the build's
# src/, where a module's objects are under OBJDIR/<module>/. For every pair of objects of
# a module it reads, with nm, which symbols each defines and which it
# needs; A uses B when A needs a symbol B defines. A pair that uses each
# other both ways is one line, and the exit status is 1.
set -u
usage="usage: check_file_cycles.sh NM SRCDIR OBJDIR"
nm=${1:?$usage}
srcdir=${2:?$usage}
objdir=${3:?$usage}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
bad=0
modules=0
for src in "$srcdir"/*/; do
    [ -f "$src/CMakeLists.txt" ] || continue
    mod="$objdir/$(basename "$src")"
    [ -d "$mod" ] || continue
    objs=$(find "$mod" -name '*.o' -o -name '*.obj' | sort)
    [ -n "$objs" ] || continue
    modules=$((modules + 1))
    : > "$tmp/edges"
    for o in $objs; do
        "$nm" --defined-only -g "$o" 2>/dev/null | awk 'NF >= 3 {print $3}' | sort -u > "$tmp/def.$(basename "$o")"
    done
    for a in $objs; do
        "$nm" -u "$a" 2>/dev/null | awk '{print $NF}' | sort -u > "$tmp/undef"
        for b in $objs; do
            [ "$a" = "$b" ] && continue
            if [ -n "$(comm -12 "$tmp/undef" "$tmp/def.$(basename "$b")")" ]; then
                echo "$(basename "$a") $(basename "$b")" >> "$tmp/edges"
            fi
        done
    done
    while read -r a b; do
        if grep -qx "$b $a" "$tmp/edges" && [ "$a" \< "$b" ]; then
            echo "$(basename "$mod"): ${a%%.*}.c and ${b%%.*}.c call each other both ways"
            bad=1
        fi
    done < "$tmp/edges"
done
if [ "$modules" = 0 ]; then
    echo "check_file_cycles: no module objects under $objdir"
    exit 2
fi
[ "$bad" = 0 ] && echo "check_file_cycles: no two files of a module call each other both ways ($modules modules)"
exit $bad

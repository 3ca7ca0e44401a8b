#!/bin/sh
# module-graph.sh [--check] [ROOT] - who uses whom, read from the tree.
#
# For each core module (src/NAME) and tool unit (tools/NAME), the core
# modules it uses: the public headers (kiln/X.h) its own files and its own
# public header include, followed through the public headers that include
# other public headers. Prints one line per module, lowest layer first:
#
#   cache  -> common pack pool
#
# With --check it also holds the core to the order of docs/design.md
# (common, then pack topo pages pool, then program, then cache, then vk,
# then prep, then foz and service, side by side): a
# core module may use only modules of a lower rank. Each break is one line;
# the exit status is 1 when there is one. docs/design.md shows the output.
set -u
check=0
if [ "${1:-}" = --check ]; then
    check=1
    shift
fi
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2

# The order of docs/design.md, lowest first; modules of one rank may not use
# each other either.
rank() {
    case $1 in
    common) echo 0 ;;
    pack | topo | pages | pool) echo 1 ;;
    program) echo 2 ;;
    cache) echo 3 ;;
    vk) echo 4 ;;
    prep) echo 5 ;;
    foz) echo 6 ;;
    service) echo 6 ;;
    *) echo 9 ;;
    esac
}

# The public headers (core and tool) a file includes directly, as paths.
direct() {
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(kiln[^"]*\.h\)".*/\1/p' "$@" \
        2>/dev/null | sort -u | while IFS= read -r h; do
        case $h in
        kiln/version.h) ;; # made by CMake from version.h.in: part of common.h
        kiln-tools/*) echo "tools/include/$h" ;;
        *) echo "include/$h" ;;
        esac
    done
}

# The core modules a set of header paths reaches, following the headers
# that include other headers.
closure() {
    seen=""
    todo=$*
    while [ -n "$todo" ]; do
        set -- $todo
        [ $# -gt 0 ] || break
        h=$1
        shift
        todo=$*
        case " $seen " in *" $h "*) continue ;; esac
        seen="$seen $h"
        [ -f "$h" ] && todo="$todo $(direct "$h" | tr '\n' ' ')"
    done
    echo "$seen" | tr ' ' '\n' | sed -n 's|^include/kiln/\([a-z_]*\)\.h$|\1|p' | sort -u
}

bad=0
for dir in src/common src/pack src/topo src/pages src/pool src/program src/cache src/vk src/prep src/foz src/service \
    $(ls -d tools/*/ 2>/dev/null | sed 's|/$||'); do
    [ -d "$dir" ] || continue
    name=${dir##*/}
    case $name in include | support) continue ;; esac
    files=$(find "$dir" -name '*.[ch]')
    [ -f "include/kiln/$name.h" ] && files="$files include/kiln/$name.h"
    uses=$(closure $(direct $files) | grep -vx "$name" | tr '\n' ' ')
    printf '%-7s -> %s\n' "$name" "${uses% }"
    [ "$check" = 1 ] && [ "${dir%%/*}" = src ] || continue
    for u in $uses; do
        if [ "$(rank "$u")" -ge "$(rank "$name")" ]; then
            echo "module-graph: $name uses $u, which is not below it (docs/design.md)" >&2
            bad=1
        fi
    done
done
exit $bad

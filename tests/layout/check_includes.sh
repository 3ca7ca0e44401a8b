#!/bin/sh
# check_includes.sh ROOT - the layer rule of docs/design.md, read from the
# #include lines of the tree at ROOT:
#   - a core file (src/) includes no tool header (tools/...), and no other
#     module's private header: only its own folder's, src/common's
#     kiln_internal.h, and public headers (kiln/...);
#   - a tool file (tools/) includes no private header of the core (src/).
# Prints one line per broken include ("FILE: includes X: why") and exits 1
# when there is one, 0 when there is none.
set -u
root=${1:?usage: check_includes.sh ROOT}
cd "$root" || exit 2
bad=0
list=$(mktemp) || exit 2
trap 'rm -f "$list"' EXIT

# Every header under src/ and tools/, by its file name (names are unique).
find src tools -name '*.h' > "$list"

where() { # where NAME: the folders holding a header of that file name
    grep -E "(^|/)$1\$" "$list" | sed 's|/[^/]*$||'
}

check() { # check FILE LAYER
    file=$1 layer=$2 dir=$(dirname "$1")
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file" |
    while IFS= read -r inc; do
        case $inc in
        kiln-tools/*)
            [ "$layer" = core ] && echo "$file: includes $inc: a tool header in the core";;
        kiln/* | kiln.h) ;;
        */*)
            echo "$file: includes $inc: a path into another folder";;
        *)
            homes=$(where "$inc")
            [ -z "$homes" ] && continue # a system or generated header
            for home in $homes; do
                [ "$home" = "$dir" ] && continue 2
            done
            if [ "$layer" = core ]; then
                case $homes in
                src/common) [ "$inc" = kiln_internal.h ] && continue
                            echo "$file: includes $inc: a private header of src/common";;
                tools*)     echo "$file: includes $inc: a tool header in the core";;
                *)          echo "$file: includes $inc: a private header of $homes";;
                esac
            else
                case $homes in
                src*)        echo "$file: includes $inc: a private header of the core ($homes)";;
                tools/support) ;;
                *)           echo "$file: includes $inc: a private header of $homes";;
                esac
            fi;;
        esac
    done
}

out=$( {
    find src -name '*.[ch]' | sort | while IFS= read -r f; do check "$f" core; done
    find tools -name '*.[ch]' | sort | while IFS= read -r f; do check "$f" tool; done
} )
if [ -n "$out" ]; then
    printf '%s\n' "$out"
    echo "check_includes: $(printf '%s\n' "$out" | wc -l) include(s) break the layer rule (docs/design.md)"
    exit 1
fi
echo "check_includes: every include of src/ and tools/ keeps the layer rule"
exit 0

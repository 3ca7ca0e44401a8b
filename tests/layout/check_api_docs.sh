#!/bin/sh
# check_api_docs.sh ROOT - every public function is documented for threads:
#   - each KILN_API declaration in ROOT/include/kiln/*.h has a doc block
#     right before it that says its thread safety (it matches
#     /[Tt]hread[- ]safe/: "Thread safety: ...", "Thread-safe", "not
#     thread-safe"), or sits in a section whose opening comment holds the line
#     "Thread safety for this section: ..." (a section runs from one
#     "/* -----" separator to the next);
#   - each KILN_API function is named in ROOT/docs/api.md.
# Prints one line per offender ("FILE:LINE: NAME: why") and exits 1 when
# there is one, 0 when there is none. HACKING.md ("Public API") says more.
set -u
root=${1:?usage: check_api_docs.sh ROOT}
cd "$root" || exit 2
api=docs/api.md
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
bad=0

# The doc block is the comment that ends on the line right before the
# declaration; a declaration's name is on its first line.
for h in include/kiln/*.h; do
    awk -v file="$h" -v names="$tmp/names" '
    /^[[:space:]]*\/\* -----/ { section = 0 }
    incomment || /^[[:space:]]*\/\*/ {
        if (!incomment) block = ""
        incomment = 1
        block = block " " $0
        if ($0 ~ /Thread safety for this section:/) section = 1
        if ($0 ~ /\*\//) { incomment = 0; lastend = NR }
        next
    }
    /^[[:space:]]*#/ { next }
    /KILN_API/ {
        if (!match($0, /kiln_[A-Za-z0-9_]*[[:space:]]*\(/)) {
            printf "%s:%d: a KILN_API declaration whose name this check cannot read\n", file, NR
            next
        }
        name = substr($0, RSTART, RLENGTH)
        sub(/[[:space:]]*\($/, "", name)
        print name >> names
        if (section) next
        if (lastend != NR - 1)
            printf "%s:%d: %s: no doc block right before it\n", file, NR, name
        else if (block !~ /[Tt]hread[- ]safe/)
            printf "%s:%d: %s: its doc block says nothing of thread safety\n", file, NR, name
    }
    ' "$h"
done > "$tmp/out"
if [ -s "$tmp/out" ]; then
    cat "$tmp/out"
    bad=1
fi

if [ ! -f "$api" ]; then
    echo "$api: missing (the table of the public API)"
    exit 1
fi
[ -f "$tmp/names" ] || : > "$tmp/names"
while IFS= read -r name; do
    if ! grep -qw -- "$name" "$api"; then
        echo "$api: $name: not in the table, though include/kiln declares it"
        bad=1
    fi
done < "$tmp/names"
exit $bad

#!/bin/sh
# kiln's style check: the layout of every C file (clang-format 14, the
# repository's .clang-format) and clang-tidy's checks on the library
# (.clang-tidy, every warning an error).
#
# usage: scripts/style.sh format
#        scripts/style.sh tidy BUILD     (BUILD has compile_commands.json)
#
# Exit 0 clean, 1 on a finding, 77 (skipped, with one line saying why) when
# the tool is missing: scripts/deps.sh test installs both.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# The tool, versioned name first. Layout differs between clang-format
# versions, so only 14 (Debian 12's) is held to the committed layout.
find_tool() {
    for t in "$1-14" "$1"; do
        if command -v "$t" >/dev/null 2>&1; then
            echo "$t"
            return 0
        fi
    done
    return 1
}

# Tracked files when this is a git checkout, else what is in the tree.
c_files() {
    if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$root" ls-files "$@"
    else
        for p in "$@"; do
            find . -path ./build\* -prune -o -type f -path "./$p" -print | sed 's|^\./||'
        done
    fi
}

case "${1:-}" in
format)
    if ! fmt=$(find_tool clang-format); then
        echo "skipped: clang-format not found (scripts/deps.sh test installs it)"
        exit 77
    fi
    if ! "$fmt" --version | grep -q 'version 14\.'; then
        echo "skipped: $fmt is not clang-format 14 ($("$fmt" --version))"
        exit 77
    fi
    files=$(c_files '*.c' '*.h')
    # shellcheck disable=SC2086
    if ! "$fmt" --dry-run -Werror $files; then
        echo "style: files above differ from clang-format's layout: run make format" >&2
        exit 1
    fi
    echo "style: $(echo "$files" | wc -l) files as clang-format lays them out"
    ;;
tidy)
    build=${2:?usage: $0 tidy BUILD}
    if ! tidy=$(find_tool clang-tidy); then
        echo "skipped: clang-tidy not found (scripts/deps.sh test installs it)"
        exit 77
    fi
    if [ ! -f "$build/compile_commands.json" ]; then
        echo "style: no $build/compile_commands.json (configure with CMAKE_EXPORT_COMPILE_COMMANDS)" >&2
        exit 1
    fi
    # The library's files this build compiles (so the platform's own files,
    # with the flags they are built with).
    files=$(sed -n 's|^ *"file": "\(.*\)",\{0,1\}$|\1|p' "$build/compile_commands.json" |
        grep "^$root/src/" | sort -u)
    n=$(echo "$files" | wc -l)
    # A file found clean is not checked again while it, every header, the
    # checks and the compile commands stay the same (clang-tidy takes
    # minutes over src/). The key of each clean file is kept in BUILD.
    ok="$build/style-tidy.ok"
    common=$( (cat .clang-tidy "$build/compile_commands.json"
        c_files '*.h' | while read -r h; do cat "$h"; done) | sha256sum | cut -c1-64)
    todo=""
    for f in $files; do
        key="$(sha256sum <"$f" | cut -c1-64)-$common"
        grep -qx "$key" "$ok" 2>/dev/null || todo="$todo $f"
    done
    if [ -n "$todo" ]; then
        # shellcheck disable=SC2086
        if ! "$tidy" -p "$build" --quiet --warnings-as-errors='*' $todo 2>/dev/null; then
            echo "style: clang-tidy found the above in src/" >&2
            exit 1
        fi
        for f in $todo; do
            echo "$(sha256sum <"$f" | cut -c1-64)-$common" >>"$ok"
        done
    fi
    echo "style: clang-tidy clean on $n files of src/ ($(echo $todo | wc -w) checked now)"
    ;;
*)
    echo "usage: $0 format | tidy BUILD" >&2
    exit 2
    ;;
esac

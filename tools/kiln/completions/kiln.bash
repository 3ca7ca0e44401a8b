# bash completion for kiln.
#
# Commands are listed here (tests/cli/conventions.sh checks the list against
# `kiln --help`); a command's options are read from its own `--help` when
# asked for, so they never fall behind the binary.

_kiln_commands="prepare start cache import export topo bench help version"
_kiln_groups_cache="stats check repack prune compact merge"
_kiln_groups_import="foz"
_kiln_groups_export="foz"
_kiln_groups_bench="store pack prepare pages replay start stutter peer"

_kiln() {
    local cur words cword
    cur=${COMP_WORDS[COMP_CWORD]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD

    # Skip the shared options that may stand before the command.
    local i=1
    while [ "$i" -lt "$cword" ]; do
        case ${words[i]} in
        -v | -vv | -q | --verbose | --quiet | --cache-affinity | --no-cache-affinity) i=$((i + 1)) ;;
        *) break ;;
        esac
    done
    if [ "$i" -eq "$cword" ]; then
        COMPREPLY=($(compgen -W "$_kiln_commands --help --version -V -v -q" -- "$cur"))
        return
    fi

    local cmd=${words[i]} sub=""
    local subs_var="_kiln_groups_$cmd"
    if [ -n "${!subs_var:-}" ]; then
        if [ $((i + 1)) -eq "$cword" ]; then
            COMPREPLY=($(compgen -W "${!subs_var}" -- "$cur"))
            return
        fi
        sub=${words[i + 1]}
    elif [ "$cmd" = help ]; then
        COMPREPLY=($(compgen -W "$_kiln_commands" -- "$cur"))
        return
    fi

    case $cur in
    -*)
        local opts
        opts=$(kiln $cmd $sub --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        ;;
    *)
        # Folders and files: caches are folders, archives and corpora paths.
        COMPREPLY=($(compgen -f -- "$cur"))
        ;;
    esac
}
complete -o filenames -F _kiln kiln

# fish completion for kiln. Commands are listed here (tests/cli/conventions.sh
# checks them against `kiln --help`); options are read from the command's own
# `--help`, so they never fall behind the binary.

set -l kiln_commands prepare start cache import export topo bench help version

function __kiln_options
    set -l words (commandline -opc)
    set -e words[1]
    set -l cmd
    for w in $words
        switch $w
            case '-*'
            case '*'
                set -a cmd $w
        end
        if test (count $cmd) -ge 2
            break
        end
    end
    switch "$cmd[1]"
        case prepare start topo help version
            set cmd $cmd[1]
    end
    kiln $cmd --help 2>/dev/null | string match -ar -- '--[a-z][a-z0-9-]*' | sort -u
end

complete -c kiln -f
complete -c kiln -n "not __fish_seen_subcommand_from $kiln_commands" -a "$kiln_commands"
complete -c kiln -n "__fish_seen_subcommand_from cache; and not __fish_seen_subcommand_from stats check repack prune compact merge" -a "stats check repack prune compact merge"
complete -c kiln -n "__fish_seen_subcommand_from import export; and not __fish_seen_subcommand_from foz" -a foz
complete -c kiln -n "__fish_seen_subcommand_from bench; and not __fish_seen_subcommand_from store pack prepare pages replay start stutter peer" -a "store pack prepare pages replay start stutter peer"
complete -c kiln -n "__fish_seen_subcommand_from help" -a "$kiln_commands"
complete -c kiln -n "string match -q -- '-*' (commandline -ct)" -a "(__kiln_options)"
complete -c kiln -n "__fish_seen_subcommand_from $kiln_commands" -F

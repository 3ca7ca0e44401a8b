/*
 * main.c - the `kiln` command: finds the command named on the command line
 * and runs it.
 *
 * Options every command shares are taken here: -v/--verbose (repeatable) and
 * -q/--quiet set the log level, --cache-affinity/--no-cache-affinity choose
 * CPU pinning (see cli_apply_cache_affinity). They may stand anywhere on the
 * line.
 */
#include "cli.h"
#include "commands.h"

#include <stdlib.h>
#include <string.h>

struct command {
    const char *group; /* "cache", "bench", or NULL for a top-level command */
    const char *name;
    cli_command_fn fn;
    const char *summary;
    bool reports; /* its text is what the user asked for, which -q keeps */
};

static const struct command commands[] = {
    {NULL, "prepare", cmd_prepare, "translate, pack and store every program; build its pipelines",
     false},
    {NULL, "start", cmd_start,
     "the warm start: open the cache, load every program, build pipelines", false},
    {"cache", "stats", cmd_cache_stats, "what a cache holds and how its last open went", true},
    {"cache", "check", cmd_cache_check, "read and check every record (--repair mends the index)",
     false},
    {"cache", "repack", cmd_cache_repack, "rewrite a cache with another codec", false},
    {"cache", "prune", cmd_cache_prune, "drop the least recently used records", false},
    {"cache", "compact", cmd_cache_compact, "rewrite the records without superseded ones", false},
    {"cache", "merge", cmd_cache_merge, "join caches of the same stamp", false},
    {"import", "foz", cmd_import_foz, "import Fossilize archives into a cache", false},
    {"export", "foz", cmd_export_foz, "write a cache's pipelines as a Fossilize archive", false},
    {NULL, "topo", cmd_topo, "CPU cache domains and whether pinning would apply", true},
    {"bench", "store", cmd_bench_store, "cache open and load: scan vs index, 1 vs N threads", true},
    {"bench", "pack", cmd_bench_pack, "SPIR-V packing: raw vs zstd -1 vs kiln's codec", true},
    {"bench", "prepare", cmd_bench_prepare, "pipeline builds per thread count; module memory",
     true},
    {"bench", "pages", cmd_bench_pages, "page-table run queries: byte scan vs summaries", true},
    {"bench", "replay", cmd_bench_replay, "Fossilize archives replayed per thread count", true},
    {"bench", "start", cmd_bench_start, "a warm start of a subset vs a cache of only it", true},
    {"bench", "stutter", cmd_bench_stutter,
     "a frame loop: sync vs async vs fast-link pipelines, side by side", true},
    {"bench", "peer", cmd_bench_peer, "fossilize-replay vs kiln prepare: whole process, one run",
     true},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kiln [-v|-q] COMMAND [ARGS...]\n\n"
            "kiln %s: program cache, SPIR-V packing and warm starts for emulators.\n\n"
            "commands:\n",
            KILN_VERSION_STRING);
    for (size_t i = 0; i < CLI_ARRAY_LEN(commands); i++) {
        char full[64];
        snprintf(full, sizeof(full), "%s%s%s", commands[i].group ? commands[i].group : "",
                 commands[i].group ? " " : "", commands[i].name);
        fprintf(out, "  %-15s %s\n", full, commands[i].summary);
    }
    fprintf(out, "\nshared options:\n"
                 "  -v, --verbose          log more (repeat for debug)\n"
                 "  -q, --quiet            log errors only\n"
                 "  --cache-affinity       pin to the CPUs sharing the largest cache\n"
                 "  --no-cache-affinity    never pin (beats KILN_CACHE_AFFINITY=1)\n"
                 "\n'kiln COMMAND --help' describes a command. Exit codes: 0 done, 1 failed, "
                 "2 bad usage or input.\n");
}

/* -q was given, and the line asks for neither --json nor --help: a command
 * that is not a report then prints nothing on stdout (errors still go to
 * stderr), so that -q is silent on success. */
static bool silence_reports;

/* Runs one command, with stdout silenced as silence_reports says. */
static int run(const struct command *c, int argc, char **argv)
{
    if (silence_reports && !c->reports)
        cli_silence_stdout();
    return c->fn(argc, argv);
}

/* Takes the shared options out of argv; @return the new argc, or -1. */
static int take_shared_options(int argc, char **argv)
{
    int level = KILN_LOG_WARN;
    int out = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            while (i < argc)
                argv[out++] = argv[i++];
            break;
        }
        if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0)
            level = level < KILN_LOG_DEBUG ? level + 1 : level;
        else if (strcmp(a, "-vv") == 0)
            level = KILN_LOG_DEBUG;
        else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0)
            level = KILN_LOG_ERROR;
        else if (strcmp(a, "--cache-affinity") == 0)
            cli_cache_affinity_flag = 1;
        else if (strcmp(a, "--no-cache-affinity") == 0)
            cli_cache_affinity_flag = 0;
        else
            argv[out++] = argv[i];
    }
    argv[out] = NULL;
    kiln_log_set_level((enum kiln_log_level)level);
    return out;
}

/* @return whether -h or --help stands on the line (before any "--"). */
static bool help_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

/* `kiln GROUP --help`: the group's commands, on stdout. */
static void group_usage(FILE *out, const char *group)
{
    fprintf(out, "usage: kiln %s COMMAND [ARGS...]\n\ncommands:\n", group);
    for (size_t i = 0; i < CLI_ARRAY_LEN(commands); i++)
        if (commands[i].group && strcmp(group, commands[i].group) == 0)
            fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'kiln %s COMMAND --help' describes a command.\n", group);
}

static int unknown_command(const char *typed);

/* Runs the command argv names; its full name goes to `name`. @return its exit code. */
static int dispatch(int argc, char **argv, char *name, size_t cap)
{
    snprintf(name, cap, "kiln %s", argv[1]);
    bool group_known = false;
    for (size_t i = 0; i < CLI_ARRAY_LEN(commands); i++) {
        const struct command *c = &commands[i];
        if (!c->group && strcmp(argv[1], c->name) == 0) {
            argv[1] = name;
            return run(c, argc - 1, argv + 1);
        }
        if (c->group && strcmp(argv[1], c->group) == 0) {
            group_known = true;
            if (argc >= 3 && strcmp(argv[2], c->name) == 0) {
                snprintf(name, cap, "kiln %s %s", c->group, c->name);
                argv[2] = name;
                return run(c, argc - 2, argv + 2);
            }
        }
    }
    if (group_known && argc >= 3 &&
        (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        group_usage(stdout, argv[1]);
        return KILN_EXIT_OK;
    }
    if (group_known) {
        char line[512];
        size_t n = (size_t)snprintf(line, sizeof(line), "expected one of:");
        for (size_t i = 0; i < CLI_ARRAY_LEN(commands) && n < sizeof(line); i++)
            if (commands[i].group && strcmp(argv[1], commands[i].group) == 0)
                n += (size_t)snprintf(line + n, sizeof(line) - n, " %s", commands[i].name);
        if (argc >= 3 && n < sizeof(line))
            snprintf(line + n, sizeof(line) - n, ", got %s", argv[2]);
        return cli_usage_error(name, "%s", line);
    }
    return unknown_command(argv[1]);
}

/* "unknown command", with the command meant when one is close. */
static int unknown_command(const char *typed)
{
    struct cli_suggest s;
    cli_suggest_begin(&s, typed);
    char full[CLI_ARRAY_LEN(commands)][64];
    for (size_t i = 0; i < CLI_ARRAY_LEN(commands); i++) {
        snprintf(full[i], sizeof(full[i]), "%s",
                 commands[i].group ? commands[i].group : commands[i].name);
        cli_suggest_offer(&s, full[i]);
    }
    cli_suggest_offer(&s, "help");
    cli_suggest_offer(&s, "version");
    const char *meant = cli_suggest_result(&s);
    if (meant)
        return cli_usage_error("kiln", "unknown command '%s'; did you mean '%s'?", typed, meant);
    return cli_usage_error("kiln", "unknown command '%s'", typed);
}

/* `kiln help CMD [SUB]`: that command's --help. */
static int help_for(int argc, char **argv)
{
    static char help_flag[] = "--help";
    char *line[5] = {argv[0], argv[2], argc >= 4 ? argv[3] : help_flag, help_flag};
    int n = argc >= 4 ? 4 : 3;
    line[n] = NULL;
    char name[64];
    return dispatch(n, line, name, sizeof(name));
}

/* -h means --help for every command, as at the top level (no command has
 * a short -h of another meaning). */
static void short_help_is_long(int argc, char **argv)
{
    static char help_flag[] = "--help";
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "-h") == 0)
            argv[i] = help_flag;
}

int main(int argc, char **argv)
{
    argc = take_shared_options(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return KILN_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        (strcmp(argv[1], "help") == 0 && argc == 2)) {
        usage(stdout);
        return KILN_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0 ||
        strcmp(argv[1], "version") == 0) {
        printf("kiln %s\n", KILN_VERSION_STRING);
        return KILN_EXIT_OK;
    }
    if (strcmp(argv[1], "help") == 0)
        return help_for(argc, argv);
    short_help_is_long(argc, argv);

    /* The isolated preparation's worker: private, not in the help. */
    if (strcmp(argv[1], "__worker") == 0) {
        static char worker_name[] = "kiln __worker";
        argv[1] = worker_name;
        return cmd_worker(argc - 1, argv + 1);
    }

    /* --help prints text, never JSON, whatever else stands on the line. */
    bool json = cli_json_wanted(argc, argv) && !help_wanted(argc, argv);
    silence_reports = kiln_log_get_level() == KILN_LOG_ERROR && !cli_json_wanted(argc, argv) &&
                      !help_wanted(argc, argv);
    cli_json_install_log_sink();
    char name[64];
    int ex = dispatch(argc, argv, name, sizeof(name));
    cli_term_finish();
    if (json)
        cli_json_emit(name, ex);
    return cli_finish_stdout(name, ex);
}

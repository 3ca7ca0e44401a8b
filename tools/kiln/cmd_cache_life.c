/* cmd_cache_life.c - not written yet. */
#include "cli.h"
#include "commands.h"

int cmd_cache_prune(int argc, char **argv)
{
    (void)argc;
    cli_error(argv[0], "not available in this build yet");
    return KILN_EXIT_FAILED;
}

int cmd_cache_compact(int argc, char **argv)
{
    (void)argc;
    cli_error(argv[0], "not available in this build yet");
    return KILN_EXIT_FAILED;
}

int cmd_cache_merge(int argc, char **argv)
{
    (void)argc;
    cli_error(argv[0], "not available in this build yet");
    return KILN_EXIT_FAILED;
}


/* cmd_cache.c - not written yet. */
#include "cli.h"
#include "commands.h"

int cmd_cache_stats(int argc, char **argv)
{
    (void)argc;
    cli_error(argv[0], "not available in this build yet");
    return KILN_EXIT_FAILED;
}

int cmd_cache_check(int argc, char **argv)
{
    (void)argc;
    cli_error(argv[0], "not available in this build yet");
    return KILN_EXIT_FAILED;
}


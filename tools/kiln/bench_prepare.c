/* bench_prepare.c - not written yet. */
#include "cli.h"
#include "commands.h"

int cmd_bench_prepare(int argc, char **argv)
{
    (void)argc;
    cli_error(argv[0], "not available in this build yet");
    return KILN_EXIT_FAILED;
}


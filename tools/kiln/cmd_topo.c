/* cmd_topo.c - not written yet. */
#include "cli.h"
#include "commands.h"

int cmd_topo(int argc, char **argv)
{
    (void)argc;
    cli_error(argv[0], "not available in this build yet");
    return KILN_EXIT_FAILED;
}

int cli_apply_cache_affinity(const char *name)
{
    (void)name;
    return KILN_EXIT_OK;
}

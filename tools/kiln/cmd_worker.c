/*
 * cmd_worker.c - `kiln __worker`: the worker process of an isolated
 * preparation (kiln prepare --isolate). Private: not in `kiln --help`; the
 * parent starts it with its channel on stdin and stdout, and it runs
 * kiln_isolate_worker_main over them with kiln's built-in shapes and the
 * Fossilize builder (cli_builders_make), as kiln prepare and start pass
 * them, so an isolated run builds Fossilize pipelines too. Log lines go to stderr, shared with the
 * parent; the library logs why a session stopped early. Exit codes: 0 the session ended as the
 * parent asked, 1 it did not (the parent logs how the worker ended).
 */
#include "cli.h"
#include "cli_kinds.h"
#include "commands.h"

#include <string.h>

int cmd_worker(int argc, char **argv)
{
    if (argc != 1) {
        cli_error(argv[0], "takes no arguments (it is started by kiln prepare --isolate)");
        return KILN_EXIT_USAGE;
    }
    struct kiln_isolate_worker_options o = KILN_ISOLATE_WORKER_OPTIONS_INIT;
    memset(&o, 0, sizeof(o));
    o.size = sizeof(o);
    struct cli_builders builders;
    if (cli_builders_make(argv[0], &builders) < 0)
        return KILN_EXIT_FAILED;
    o.builders = builders.list;
    o.nbuilders = builders.n;
    /* It logs why it stopped, in one line (nothing when the parent went). */
    int rc = kiln_isolate_worker_main(-1, -1, &o);
    cli_builders_free(&builders);
    return rc == KILN_OK ? KILN_EXIT_OK : KILN_EXIT_FAILED;
}

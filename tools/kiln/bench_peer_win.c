/*
 * bench_peer_win.c - `kiln bench peer` on Windows: not available. Its
 * measure is the whole process tree's wall time and peak from wait4 and
 * /proc, which this platform does not have; the command says so in one
 * line, as `kiln bench replay` does.
 */
#include "bench_peer.h"
#include "cli.h"

int bench_peer_measure(struct peer_bench *b)
{
    cli_error(b->name, "not available on this platform (each tool runs as a child process "
                       "measured with wait4 and /proc)");
    return KILN_ENOTSUP;
}

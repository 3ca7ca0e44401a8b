/*
 * bench_fork_win.c - the benchmarks that measure only in forked children
 * or in Linux's page cache are not in the Windows build: each says so in
 * one line, with its reason, and ends with KILN_EXIT_FAILED.
 *
 * `kiln bench store` (bench_store_unix.c) drops files from the page cache
 * with posix_fadvise and reads with pread; `kiln bench prepare`, `kiln
 * bench replay` and `kiln bench stutter` (bench_prepare_unix.c,
 * bench_replay_unix.c, bench_stutter_unix.c) run each measurement in a
 * forked process whose peak memory is reset (bench_child_unix.c). The
 * benchmarks that need neither (pack, pages, start, peer's options) are
 * portable files.
 */
#include "cli.h"
#include "commands.h"

static int not_here(const char *name, const char *why)
{
    cli_error(name, "not available on this platform (%s)", why);
    return KILN_EXIT_FAILED;
}

int cmd_bench_store(int argc, char **argv)
{
    (void)argc;
    return not_here(argv[0], "it measures Linux's page cache");
}

int cmd_bench_prepare(int argc, char **argv)
{
    (void)argc;
    return not_here(argv[0], "each measurement runs in a forked process");
}

int cmd_bench_replay(int argc, char **argv)
{
    (void)argc;
    return not_here(argv[0], "each thread count runs in a forked process whose peak memory is "
                             "reset");
}

int cmd_bench_stutter(int argc, char **argv)
{
    (void)argc;
    return not_here(argv[0], "each mode runs in a forked process whose peak memory is reset");
}

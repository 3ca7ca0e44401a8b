/*
 * bench_child_win.c - no measuring child process on Windows: there is no
 * fork, so bench_child_run says so in one line, and the peak is the
 * process's own (kiln_peak_rss_bytes), never reset. The benchmarks that
 * measure only in children are not in this build (bench_fork_win.c).
 */
#include "bench_child.h"

#include <stdlib.h>

void bench_child_no_disk_cache(void)
{
    _putenv_s("MESA_SHADER_CACHE_DISABLE", "true");
    _putenv_s("MESA_GLSL_CACHE_DISABLE", "true");
    _putenv_s("__GL_SHADER_DISK_CACHE", "0");
}

int bench_child_run(const char *name, const char *what, bench_child_fn fn, void *arg, void *result,
                    size_t size)
{
    (void)what, (void)fn, (void)arg, (void)result, (void)size;
    cli_error(name, "not available on this platform (each measurement runs in a forked process)");
    return KILN_ENOTSUP;
}

bool bench_child_reset_peak(void)
{
    return false;
}

uint64_t bench_child_peak_rss(bool reset)
{
    (void)reset;
    return kiln_peak_rss_bytes();
}

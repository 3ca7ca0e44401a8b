/*
 * bench_child.c - what the benchmarks share on every platform: their
 * --threads list, parsed and written to --json. The measuring child
 * process is bench_child_unix.c (bench_child_win.c: there is none).
 */
#include "bench_child.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int bench_parse_threads(const char *name, const char *text, unsigned *list, unsigned *n)
{
    *n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        if (*p < '0' || *p > '9')
            return cli_usage_error(name, "--threads: expected numbers like 1,2,4, got '%s'", text);
        unsigned long v = strtoul(p, &end, 10);
        if (v < 1 || v > 1024 || *n >= BENCH_MAX_RUNS)
            return cli_usage_error(name,
                                   "--threads: %lu is out of range (1..1024, at most %d counts)", v,
                                   BENCH_MAX_RUNS);
        list[(*n)++] = (unsigned)v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return cli_usage_error(name, "--threads: expected numbers like 1,2,4, got '%s'", text);
    }
    if (*n == 0)
        return cli_usage_error(name, "--threads: empty list");
    return 0;
}

void bench_json_threads(struct cli_json *j, const unsigned *list, unsigned n)
{
    cli_json_array_begin(j, "threads");
    for (unsigned i = 0; i < n; i++)
        cli_json_u64(j, NULL, list[i]);
    cli_json_array_end(j);
}

/*
 * fuzz_pool_probe.c - the parsers of the files the pool's probe reads from
 * the OS: cgroup v2 cpu.max and memory.max, /proc/meminfo,
 * /proc/self/cgroup, /proc/<pid>/statm and smaps_rollup, and the Windows heap header's
 * signature. Each input goes through all seven;
 * results are checked against what the parsers promise (a period is never
 * 0, a path starts with '/' and fits, a heap kind is one of the known ones).
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Copy into an exact-size buffer so ASan sees any read past `size`. */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);

    uint64_t quota = 1, period = 1;
    if (kiln__pool_parse_cpu_max(text, size, &quota, &period) == KILN_OK && period == 0)
        abort();

    uint64_t bytes;
    int rc = kiln__pool_parse_meminfo(text, size, &bytes);
    int mem_rc = rc;
    if (rc != KILN_OK && rc != KILN_ENOTFOUND && rc != KILN_EPARSE)
        abort();

    uint64_t pss = 1;
    rc = kiln__pool_parse_kb_line(text, size, "Pss:", &pss);
    if ((rc != KILN_OK && rc != KILN_ENOTFOUND && rc != KILN_EPARSE) ||
        (rc == KILN_OK && pss % 1024 != 0))
        abort();

    uint64_t limit = 1;
    rc = kiln__pool_parse_memory_max(text, size, &limit);
    if (rc != KILN_OK && rc != KILN_EPARSE)
        abort();
    uint64_t rss = 1;
    rc = kiln__pool_parse_statm(text, size, 4096, &rss);
    if ((rc != KILN_OK && rc != KILN_EPARSE) || (rc == KILN_OK && rss % 4096 != 0))
        abort();

    char path[256];
    rc = kiln__pool_parse_cgroup(text, size, path, sizeof(path));
    if (rc == KILN_OK && (path[0] != '/' || strlen(path) >= sizeof(path)))
        abort();

    enum kiln_heap_kind heap;
    uint32_t sig;
    int hrc = kiln__pool_heap_kind(text, size, &heap, &sig);
    if (hrc == KILN_OK && heap != KILN_HEAP_NT && heap != KILN_HEAP_SEGMENT)
        abort();
    if (hrc != KILN_OK && hrc != KILN_ENOTFOUND && hrc != KILN_EINVAL)
        abort();

    /* The policy over whatever was parsed keeps its bounds. */
    struct kiln_pool_machine m = {.size = sizeof(m),
                                  .cpus_usable = size % 300,
                                  .quota_us = quota,
                                  .period_us = period,
                                  .mem_available = mem_rc == KILN_OK ? bytes : 0};
    struct kiln_pool_plan plan = KILN_POOL_PLAN_INIT;
    kiln_pool_policy(&m,
                     &(struct kiln_pool_limits){.size = sizeof(struct kiln_pool_limits),
                                                .mem_per_worker = 1u << 20,
                                                .background = size & 1},
                     &plan);
    if (plan.workers < 1 || plan.workers > plan.cpus)
        abort();
    free(text);
    return 0;
}

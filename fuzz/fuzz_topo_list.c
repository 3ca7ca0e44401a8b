/*
 * fuzz_topo_list.c - the CPU list and CPU mask parsers of topo (the text of
 * sysfs shared_cpu_list / shared_cpu_map / online and cgroup cpuset files).
 *
 * Whatever the bytes, a parse either fails and leaves the set empty, or
 * succeeds and the set, printed as a list and parsed again, is the same set.
 */
#include "kiln/topo.h"

#include <stdlib.h>
#include <string.h>

static void check_round_trip(const struct kiln_cpuset *set)
{
    size_t n = kiln_cpuset_format(set, NULL, 0);
    char *text = malloc(n + 1);
    if (!text)
        return;
    if (kiln_cpuset_format(set, text, n + 1) != n || strlen(text) != n)
        abort();
    struct kiln_cpuset again = {0};
    if (kiln_cpuset_parse_list(&again, text, n) != 0)
        abort();
    if (kiln_cpuset_count(&again) != kiln_cpuset_count(set))
        abort();
    for (int64_t c = kiln_cpuset_next(set, 0); c >= 0; c = kiln_cpuset_next(set, (uint32_t)c + 1))
        if (!kiln_cpuset_has(&again, (uint32_t)c) || c >= (int64_t)KILN_TOPO_MAX_CPUS)
            abort();
    kiln_cpuset_free(&again);
    free(text);
}

static void one(int (*parse)(struct kiln_cpuset *, const char *, size_t), const char *text,
                size_t n)
{
    struct kiln_cpuset set = {0};
    int rc = parse(&set, text, n);
    if (rc < 0) {
        if (set.words || set.nwords)
            abort(); /* a failed parse leaves nothing behind */
        return;
    }
    check_round_trip(&set);
    kiln_cpuset_free(&set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    one(kiln_cpuset_parse_list, text, size);
    one(kiln_cpuset_parse_mask, text, size);
    return 0;
}

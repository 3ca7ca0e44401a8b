/*
 * fuzz_topo_slpi.c - the Windows topology parser (topo_slpi.c), which reads
 * the records GetLogicalProcessorInformationEx fills a buffer with. It is
 * portable code, so it is fuzzed on every platform.
 *
 * The first byte picks the flags; the rest is the buffer. A parse either
 * fails with no result or gives a topology whose domains all lie within the
 * online CPUs, whose largest domain (when there is one) is one of them, and
 * that frees cleanly.
 */
#include "topo_internal.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned flags = (data[0] & 1) ? KILN_TOPO_ALL_LEVELS : 0;
    struct kiln_topo *t = NULL;
    int rc = kiln__topo_parse_slpi(data + 1, size - 1, flags, &t);
    if (rc < 0) {
        if (t)
            abort(); /* a failed parse leaves no partial result */
        return 0;
    }
    if (!t)
        abort();
    for (size_t i = 0; i < t->ndomains; i++) {
        const struct kiln_cpuset *cpus = &t->domains[i].cpus;
        for (int64_t c = kiln_cpuset_next(cpus, 0); c >= 0;
             c = kiln_cpuset_next(cpus, (uint32_t)c + 1))
            if (!kiln_cpuset_has(&t->online, (uint32_t)c))
                abort();
    }
    if (t->largest >= 0 && (uint64_t)t->largest >= t->ndomains)
        abort();
    kiln_topo_free(t);
    return 0;
}

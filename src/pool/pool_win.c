/*
 * pool_win.c - reading the machine on Windows.
 *
 * The place for the Windows probe. It is to count the CPUs of the process's
 * group affinity (GetProcessGroupAffinity / GetActiveProcessorCount), read
 * free memory with GlobalMemoryStatusEx (ullAvailPhys), and tell the heap
 * kind from the process heap's header (the segment heap's signature) so the
 * policy can halve the workers for the NT heap. Job-object CPU rate limits
 * play the role of cgroup quotas. Until then the probe reports what the C
 * runtime can tell and leaves the rest unknown, which the policy names in
 * its reason.
 */
#include "kiln_internal.h"
#include "pool_internal.h"

#include <string.h>
#include <windows.h>

unsigned kiln__pool_affinity_cpus(void)
{
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (unsigned)n : 0;
}

int kiln_pool_probe(const char *proc_root, const char *cgroup_root, struct kiln_pool_machine *m)
{
    (void)proc_root;
    (void)cgroup_root;
    if (!m)
        return KILN_EINVAL;
    memset(m, 0, sizeof(*m));
    m->cpus_usable = kiln__pool_affinity_cpus();
    if (m->cpus_usable == 0)
        m->flags |= KILN_POOL_CPUS_UNKNOWN;
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof(ms);
    if (GlobalMemoryStatusEx(&ms))
        m->mem_available = ms.ullAvailPhys;
    else
        m->flags |= KILN_POOL_MEM_UNKNOWN;
    /* The heap kind is not read yet: assume the NT heap, the default, which
     * is the safe side of the rule. */
    m->heap = KILN_HEAP_NT;
    return KILN_OK;
}

/*
 * cache_sys_win.c - what the cache asks of Windows beyond file I/O: the
 * number of CPUs this process may run on, and memory for large blocks.
 *
 * CPUs: a process in one processor group has an affinity mask, and its bits
 * are the CPUs it may use. A process whose threads span several groups gets
 * zero masks back (that is how GetProcessAffinityMask says so); it may use
 * every active processor of the system then.
 *
 * Large blocks come straight from VirtualAlloc: committed pages read as zero
 * without being written, cost memory only once touched, and go back to the
 * system at once when freed instead of staying in the heap. Under the NT
 * heap this also keeps many parallel loads off the heap's one lock for the
 * blocks that matter.
 */
#include "cache_internal.h"

#include <stdlib.h>
#include <windows.h>

unsigned kiln__cache_cpus(void)
{
    DWORD_PTR mask = 0, system = 0;
    if (GetProcessAffinityMask(GetCurrentProcess(), &mask, &system) && mask != 0) {
        unsigned n = 0;
        for (; mask; mask &= mask - 1)
            n++;
        return n;
    }
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (unsigned)n : 1u;
}

/* Below this, malloc: a region is at least one 64 KiB allocation unit. */
#define BIG_MIN (256u << 10)

void *kiln__cache_alloc_big(size_t n)
{
    if (n < BIG_MIN)
        return malloc(n);
    return VirtualAlloc(NULL, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void kiln__cache_free_big(void *p, size_t n)
{
    if (!p)
        return;
    if (n >= BIG_MIN) {
        VirtualFree(p, 0, MEM_RELEASE);
        return;
    }
    free(p);
}

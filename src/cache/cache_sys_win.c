/*
 * cache_sys_win.c - what the cache asks of Windows beyond file I/O: memory
 * for large blocks.
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

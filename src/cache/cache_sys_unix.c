/*
 * cache_sys_unix.c - what the cache asks of the operating system beyond
 * file I/O: memory for large blocks.
 */
#include "cache_internal.h"

#include <stdlib.h>
#include <sys/mman.h>

/* Large blocks are mapped with their pages populated up front: one call
 * instead of a page fault per 4 KiB as a pread fills them, which was most of
 * a load's CPU time. (Transparent huge pages were tried too: in "madvise"
 * mode a fault may compact memory first, which stalled loads for seconds
 * right after a large cache had been written.) */
#define BIG_MIN (256u << 10)

void *kiln__cache_alloc_big(size_t n)
{
    if (n < BIG_MIN)
        return malloc(n);
#ifdef MAP_POPULATE
    void *p =
        mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#else
    return malloc(n);
#endif
}

void kiln__cache_free_big(void *p, size_t n)
{
    if (!p)
        return;
#ifdef MAP_POPULATE
    if (n >= BIG_MIN) {
        munmap(p, n);
        return;
    }
#endif
    free(p);
}

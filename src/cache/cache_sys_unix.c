/*
 * cache_sys_unix.c - what the cache asks of the operating system beyond
 * file I/O: the number of CPUs this process may run on.
 */
#include "cache_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

unsigned kiln__cache_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (unsigned)n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

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

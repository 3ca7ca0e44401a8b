/*
 * pages_unix.c - chunk memory on Unix: anonymous private mappings.
 *
 * mmap gives zeroed memory without writing it, so a chunk costs physical
 * memory only for the 4 KiB pieces a store touches, and munmap gives it all
 * back at destroy. Chunks are only freed by kiln_pages_destroy, never while
 * readers may hold a pointer.
 */
#include "pages_os.h"

#include <sys/mman.h>

void *kiln__pages_os_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void kiln__pages_os_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}

/*
 * pages_win.c - chunk memory on Windows: VirtualAlloc regions.
 *
 * A chunk is one region reserved and committed in a single VirtualAlloc
 * call. Committed pages read as zero and take physical memory only when
 * first touched (commit charges the page file, not RAM), which matches the
 * anonymous mappings of pages_unix.c. VirtualFree(MEM_RELEASE) returns the
 * whole region; it takes size 0 and the base VirtualAlloc gave, which is why
 * `bytes` is unused here. Chunks are only freed by kiln_pages_destroy, never
 * while readers may hold a pointer.
 */
#include "pages_os.h"

#include <windows.h>

void *kiln__pages_os_alloc(size_t bytes)
{
    return VirtualAlloc(NULL, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void kiln__pages_os_free(void *p, size_t bytes)
{
    (void)bytes;
    if (p)
        VirtualFree(p, 0, MEM_RELEASE);
}

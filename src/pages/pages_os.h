/*
 * pages_os.h - where the pages module gets chunk memory from.
 *
 * A chunk is about 65 KiB that must read as zero bytes when it arrives. The
 * platform files provide it: pages_unix.c maps anonymous memory (the kernel
 * hands out zeroed pages and commits them only when touched); a Windows
 * pages_win.c would use VirtualAlloc(MEM_RESERVE | MEM_COMMIT).
 */
#ifndef KILN_PAGES_OS_H
#define KILN_PAGES_OS_H

#include <stddef.h>

/* @return `bytes` of zeroed, page-aligned memory, or NULL. Thread-safe. */
void *kiln__pages_os_alloc(size_t bytes);

/* Returns memory from kiln__pages_os_alloc (same `bytes`). NULL is a no-op. */
void kiln__pages_os_free(void *p, size_t bytes);

#endif /* KILN_PAGES_OS_H */

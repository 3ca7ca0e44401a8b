/*
 * alloc.c - the library's one door to memory.
 *
 * Every allocation in src/ goes through kiln__malloc and its siblings, so
 * that an application's allocator (kiln_set_allocator) sees all of them.
 * Until one is set they are libc's.
 */
#include "kiln_internal.h"

#include <string.h>

void *kiln__malloc(size_t n)
{
    return malloc(n);
}

void *kiln__calloc(size_t count, size_t n)
{
    return calloc(count, n);
}

void *kiln__realloc(void *p, size_t n)
{
    return realloc(p, n);
}

void kiln__free(void *p)
{
    free(p);
}

char *kiln__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = kiln__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

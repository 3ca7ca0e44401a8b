/*
 * alloc.c - the library's one door to memory.
 *
 * Every allocation in src/ goes through kiln__malloc and its siblings, so
 * that an application's allocator (kiln_set_allocator) sees all of them.
 * Until one is set they are libc's.
 *
 * Invariants: `live` counts the blocks made through the allocator in force
 * and not freed yet (malloc, calloc, strdup and realloc of NULL add one,
 * free of a block takes one), so kiln_set_allocator can refuse to switch
 * while a block would be freed through another allocator than its own.
 * kiln never asks an allocator for 0 bytes (it asks for 1), so every
 * success is a block to free and NULL always means out of memory.
 */
#include "kiln_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static void *libc_malloc(void *user, size_t n)
{
    (void)user;
    return malloc(n);
}

static void *libc_realloc(void *user, void *p, size_t n)
{
    (void)user;
    return realloc(p, n);
}

static void libc_free(void *user, void *p)
{
    (void)user;
    free(p);
}

static void *libc_calloc(void *user, size_t count, size_t n)
{
    (void)user;
    return calloc(count, n);
}

static const struct kiln_allocator libc_allocator = {
    .size = sizeof(struct kiln_allocator),
    .malloc_fn = libc_malloc,
    .realloc_fn = libc_realloc,
    .free_fn = libc_free,
    .calloc_fn = libc_calloc,
};

/* Set only by kiln_set_allocator, which no other kiln call may overlap. */
static struct kiln_allocator current = {
    .size = sizeof(struct kiln_allocator),
    .malloc_fn = libc_malloc,
    .realloc_fn = libc_realloc,
    .free_fn = libc_free,
    .calloc_fn = libc_calloc,
};

static atomic_llong live;

static void *counted(void *p)
{
    if (p)
        atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
    return p;
}

void *kiln__malloc(size_t n)
{
    return counted(current.malloc_fn(current.user, n ? n : 1));
}

void *kiln__calloc(size_t count, size_t n)
{
    if (count == 0 || n == 0)
        count = n = 1;
    if (count > SIZE_MAX / n)
        return NULL;
    if (current.calloc_fn)
        return counted(current.calloc_fn(current.user, count, n));
    void *p = current.malloc_fn(current.user, count * n);
    if (p)
        memset(p, 0, count * n);
    return counted(p);
}

void *kiln__realloc(void *p, size_t n)
{
    if (!p)
        return kiln__malloc(n);
    return current.realloc_fn(current.user, p, n ? n : 1);
}

void kiln__free(void *p)
{
    if (!p)
        return;
    atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
    current.free_fn(current.user, p);
}

char *kiln__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = kiln__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int kiln_set_allocator(const struct kiln_allocator *a)
{
    struct kiln_allocator next;
    KILN_TRY(KILN_STRUCT_IN(&next, a ? a : &libc_allocator, "kiln_allocator"));
    if (!next.malloc_fn || !next.realloc_fn || !next.free_fn) {
        KILN_ERROR("alloc", "kiln_allocator: malloc_fn, realloc_fn and free_fn are required");
        return KILN_EINVAL;
    }
    long long n = atomic_load(&live);
    if (n > 0) {
        KILN_ERROR("alloc",
                   "kiln_set_allocator: %lld blocks kiln allocated are still held "
                   "(set the allocator before any other kiln call)",
                   n);
        return KILN_EBUSY;
    }
    current = next;
    return 0;
}

int kiln_get_allocator(struct kiln_allocator *out)
{
    if (!out)
        return KILN_EINVAL;
    struct kiln_allocator probe;
    KILN_TRY(KILN_STRUCT_IN(&probe, out, "kiln_allocator"));
    KILN_STRUCT_OUT(out, &current);
    return 0;
}

void *kiln_malloc(size_t n)
{
    return kiln__malloc(n);
}

void *kiln_calloc(size_t count, size_t n)
{
    return kiln__calloc(count, n);
}

void *kiln_realloc(void *p, size_t n)
{
    return kiln__realloc(p, n);
}

void kiln_free(void *p)
{
    kiln__free(p);
}

long long kiln_allocations_live(void)
{
    return atomic_load(&live);
}

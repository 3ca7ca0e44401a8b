/*
 * kt_vkalloc.c - counting VkAllocationCallbacks over libc (kt_vkalloc.h).
 */
#include "kt_vkalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Counting callbacks over libc. Before each block sit its size and the
 * pointer malloc gave, so realloc can copy and free can find it; the
 * block is aligned as the driver asks. */
struct cb_head {
    void *raw;
    size_t size;
};

static void *VKAPI_CALL cb_alloc(void *user, size_t size, size_t align, VkSystemAllocationScope s)
{
    (void)s;
    struct kt_vk_counts *c = user;
    if (align < sizeof(void *))
        align = sizeof(void *);
    unsigned char *raw = malloc(size + align + sizeof(struct cb_head));
    if (!raw)
        return NULL;
    uintptr_t at = (uintptr_t)(raw + sizeof(struct cb_head));
    at = (at + align - 1) & ~(uintptr_t)(align - 1);
    struct cb_head h = {raw, size};
    memcpy((unsigned char *)at - sizeof h, &h, sizeof h);
    atomic_fetch_add(&c->allocs, 1);
    atomic_fetch_add(&c->live, 1);
    return (void *)at;
}

static struct cb_head cb_head_of(void *mem)
{
    struct cb_head h;
    memcpy(&h, (unsigned char *)mem - sizeof h, sizeof h);
    return h;
}

static void VKAPI_CALL cb_free(void *user, void *mem)
{
    struct kt_vk_counts *c = user;
    if (!mem)
        return;
    atomic_fetch_add(&c->frees, 1);
    atomic_fetch_sub(&c->live, 1);
    free(cb_head_of(mem).raw);
}

static void *VKAPI_CALL cb_realloc(void *user, void *old, size_t size, size_t align,
                                   VkSystemAllocationScope s)
{
    if (!old)
        return cb_alloc(user, size, align, s);
    if (size == 0) {
        cb_free(user, old);
        return NULL;
    }
    void *p = cb_alloc(user, size, align, s);
    if (!p)
        return NULL;
    size_t was = cb_head_of(old).size;
    memcpy(p, old, was < size ? was : size);
    cb_free(user, old);
    return p;
}

VkAllocationCallbacks kt_vk_counting_callbacks(struct kt_vk_counts *counts)
{
    return (VkAllocationCallbacks){
        .pUserData = counts,
        .pfnAllocation = cb_alloc,
        .pfnReallocation = cb_realloc,
        .pfnFree = cb_free,
    };
}

/*
 * abi.c - reading and writing the caller's growable structs.
 *
 * A struct that crosses the API begins with `size_t size` (kiln/common.h,
 * docs/abi.md). The caller's struct may be older than the library's (fewer
 * fields: the rest keep their zero defaults) or newer (more fields: refused
 * unless they are all zero, since this library could not honour them).
 * This is the one place that rule is written.
 */
#include "kiln_internal.h"

#include <string.h>

static bool tail_is_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

int kiln__struct_check(const void *p, size_t own_size, const char *what)
{
    size_t size = *(const size_t *)p;
    if (size == 0) {
        KILN_ERROR("abi", "%s: size is 0 (initialise it with its INIT macro or size = sizeof)",
                   what);
        return KILN_EINVAL;
    }
    if (size < sizeof(size_t)) {
        KILN_ERROR("abi", "%s: size %zu is smaller than its size field", what, size);
        return KILN_EINVAL;
    }
    if (size > own_size && !tail_is_zero((const unsigned char *)p + own_size, size - own_size)) {
        KILN_ERROR("abi",
                   "%s: fields past byte %zu are set, and this kiln (%s) does not know them "
                   "(built against newer headers?)",
                   what, own_size, kiln_version_string());
        return KILN_EINVAL;
    }
    return 0;
}

int kiln__struct_in(void *dst, size_t dst_size, const void *src, const char *what)
{
    memset(dst, 0, dst_size);
    *(size_t *)dst = dst_size;
    if (!src)
        return 0;
    int rc = kiln__struct_check(src, dst_size, what);
    if (rc)
        return rc;
    size_t n = KILN_MIN(*(const size_t *)src, dst_size);
    memcpy((unsigned char *)dst + sizeof(size_t), (const unsigned char *)src + sizeof(size_t),
           n - sizeof(size_t));
    return 0;
}

int kiln__struct_out_check(const void *dst, const char *what)
{
    size_t size = *(const size_t *)dst;
    if (size >= sizeof(size_t))
        return 0;
    KILN_ERROR("abi", "%s: size is %zu (initialise it with its INIT macro or size = sizeof)", what,
               size);
    return KILN_EINVAL;
}

void kiln__struct_out(void *dst, const void *src, size_t src_size)
{
    if (!dst)
        return;
    size_t size = *(const size_t *)dst;
    if (size < sizeof(size_t))
        return;
    size_t n = KILN_MIN(size, src_size);
    memcpy((unsigned char *)dst + sizeof(size_t), (const unsigned char *)src + sizeof(size_t),
           n - sizeof(size_t));
    /* A newer caller's fields this library does not know read as their
     * zero defaults. */
    if (size > src_size)
        memset((unsigned char *)dst + src_size, 0, size - src_size);
}

void kiln__elem_out(void *array, size_t stride, size_t i, const void *src, size_t src_size)
{
    memcpy((unsigned char *)array + i * stride, src, KILN_MIN(stride, src_size));
}

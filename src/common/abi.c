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

int kiln__struct_in(void *dst, size_t dst_size, const void *src, const char *what)
{
    memset(dst, 0, dst_size);
    *(size_t *)dst = dst_size;
    if (!src)
        return 0;
    size_t size = *(const size_t *)src;
    if (size == 0) {
        KILN_ERROR("abi", "%s: size is 0 (initialise it with its INIT macro or size = sizeof)",
                   what);
        return KILN_EINVAL;
    }
    if (size < sizeof(size_t)) {
        KILN_ERROR("abi", "%s: size %zu is smaller than its size field", what, size);
        return KILN_EINVAL;
    }
    if (size > dst_size &&
        !tail_is_zero((const unsigned char *)src + dst_size, size - dst_size)) {
        KILN_ERROR("abi",
                   "%s: fields past byte %zu are set, and this kiln (%s) does not know them "
                   "(built against newer headers?)",
                   what, dst_size, kiln_version_string());
        return KILN_EINVAL;
    }
    size_t n = KILN_MIN(size, dst_size);
    memcpy((unsigned char *)dst + sizeof(size_t), (const unsigned char *)src + sizeof(size_t),
           n - sizeof(size_t));
    return 0;
}

void kiln__struct_out(void *dst, const void *src, size_t src_size)
{
    if (!dst)
        return;
    size_t size = *(const size_t *)dst;
    size_t n = KILN_MIN(size, src_size);
    if (n > sizeof(size_t))
        memcpy((unsigned char *)dst + sizeof(size_t), (const unsigned char *)src + sizeof(size_t),
               n - sizeof(size_t));
}

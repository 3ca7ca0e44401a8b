/*
 * hash.c - checksums and keys through libxxhash (XXH3).
 */
#include "kiln_internal.h"

#include <xxhash.h>

uint64_t kiln_hash64(const void *data, size_t n)
{
    if (!data)
        n = 0; /* NULL hashes as no bytes (include/kiln/common.h) */
    return XXH3_64bits(data, n);
}

struct kiln_key kiln_hash128(const void *data, size_t n)
{
    if (!data)
        n = 0; /* NULL hashes as no bytes (include/kiln/common.h) */
    XXH128_hash_t h = XXH3_128bits(data, n);
    return (struct kiln_key){.lo = h.low64, .hi = h.high64};
}

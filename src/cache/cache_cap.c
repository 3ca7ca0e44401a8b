/*
 * cache_cap.c - kiln_cache_put: a record stored through the store
 * (cache.c), then the cache's size cap kept through the life cycle
 * (cache_life.c). The door sits above both so that neither calls the
 * other both ways: the store knows nothing of evictions, and the rewrites
 * store through the store's own put (a merge keeps the cap once, at its
 * end).
 *
 * Invariant: the record a put stores is in the table (and the file) before
 * the cap is kept, and it is this handle's, so the eviction that follows
 * never takes it. A failed eviction does not make the put fail: the record
 * is stored (a caller told otherwise would store it again), the rewrite
 * left the old file whole and logged why, and the next put tries again.
 */
#include "cache_internal.h"

static int put_body(struct kiln_cache *c, struct kiln_key key, const void *payload, size_t size,
                    uint32_t raw_size, uint8_t codec, uint16_t stages)
{
    KILN_TRY(kiln__cache_put_record(c, key, payload, size, raw_size, codec, stages));
    kiln__cache_keep_cap(c); /* logged when it fails; the record is stored either way */
    return KILN_OK;
}

int kiln_cache_put(struct kiln_cache *c, struct kiln_key key, const void *payload, size_t size,
                   uint32_t raw_size, uint8_t codec, uint16_t stages)
{
    uint64_t m = kiln__err_mark();
    return KILN__CACHE_END(c, m, "kiln_cache_put",
                           put_body(c, key, payload, size, raw_size, codec, stages));
}

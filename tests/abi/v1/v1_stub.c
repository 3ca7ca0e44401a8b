/*
 * v1_stub.c - stands in for libkiln.so.1 at link time only: it defines the
 * functions tests/abi/v1/client.c calls, under the SONAME libkiln.so.1, so
 * that the client records the dependency a client built against the real
 * .so.1 records. It is never loaded by the test (the client runs beside
 * libkiln.so.2 only); if it were, every call fails.
 */
#include "kiln.h"

int kiln_cache_open(const char *dir, const struct kiln_cache_options *opt, struct kiln_cache **out)
{
    (void)dir, (void)opt, (void)out;
    return KILN_ENOTSUP;
}

int kiln_cache_put(struct kiln_cache *c, struct kiln_key key, const void *payload, size_t size,
                   uint32_t raw_size, uint8_t codec, uint16_t stages)
{
    (void)c, (void)key, (void)payload, (void)size, (void)raw_size, (void)codec, (void)stages;
    return KILN_ENOTSUP;
}

int kiln_cache_get(struct kiln_cache *c, struct kiln_key key, struct kiln_cache_result *result)
{
    (void)c, (void)key, (void)result;
    return KILN_ENOTSUP;
}

void kiln_cache_payload_free(void *data)
{
    (void)data;
}

void kiln_cache_close(struct kiln_cache *c)
{
    (void)c;
}

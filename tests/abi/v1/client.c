/*
 * client.c - an emulator's use of the cache as built against the headers
 * of libkiln.so.1 (tests/abi/v1/include, copied from the release before
 * the growable ABI): it opens a cache with the old kiln_cache_options (no
 * size field), stores one record and reads it back with the old
 * kiln_cache_result. Built against the .so.1 stub (v1_stub.c) the way it
 * was once built against the real library, it needs libkiln.so.1; the
 * test (abi.v1_client_refused) runs it beside the libkiln.so.2 this tree
 * makes and checks that the dynamic loader refuses it, so it never runs
 * against a layout it does not know. It prints nothing when refused.
 */
#include "kiln.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "v1-cache";
    struct kiln_cache_options o;
    memset(&o, 0, sizeof(o));
    o.stamp = 1;
    o.flags = KILN_CACHE_CREATE;
    struct kiln_cache *c = NULL;
    int rc = kiln_cache_open(dir, &o, &c);
    if (rc < 0)
        return 1;
    struct kiln_key key = {1, 2};
    uint32_t payload[4] = {1, 2, 3, 4};
    rc = kiln_cache_put(c, key, payload, sizeof(payload), sizeof(payload), KILN_CODEC_RAW, 1);
    struct kiln_cache_result r;
    if (rc == KILN_OK)
        rc = kiln_cache_get(c, key, &r);
    printf("v1 client ran: %d\n", rc);
    if (rc == KILN_OK)
        kiln_cache_payload_free(r.data);
    kiln_cache_close(c);
    return rc == KILN_OK ? 0 : 1;
}

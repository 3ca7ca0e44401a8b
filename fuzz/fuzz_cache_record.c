/*
 * fuzz_cache_record.c - the cache's readers of records-file bytes
 * (src/cache/cache_format.h): the file header, a record head, and a round
 * trip of a decoded head through the encoder.
 */
#include "cache_format.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kiln__cache_header h;
    enum kiln__cache_header_verdict v =
        kiln__cache_header_decode(data, size, KILN__CACHE_REC_MAGIC, &h);
    if (v == KILN__HEADER_OK &&
        ((h.version != KILN__CACHE_VERSION && h.version != KILN__CACHE_VERSION_1) || size < 64))
        abort();
    /* A header that decodes re-encodes to the same bytes. */
    if (v == KILN__HEADER_OK) {
        unsigned char again[KILN__CACHE_HEADER_SIZE];
        kiln__cache_header_encode(again, KILN__CACHE_REC_MAGIC, &h);
        if (memcmp(again, data, KILN__CACHE_HEADER_SIZE) != 0)
            abort();
    }
    /* Every 8-aligned position holds a candidate head, as for a scan. */
    for (size_t off = 0; off + KILN__CACHE_HEAD_SIZE <= size; off += 8) {
        struct kiln_cache_entry e = {0};
        if (kiln__cache_head_decode(data + off, size - off, &e) != KILN_OK)
            continue;
        if (e.size > KILN_CACHE_MAX_PAYLOAD)
            abort();
        /* A head that decodes re-encodes to the same bytes. */
        unsigned char again[KILN__CACHE_HEAD_SIZE];
        kiln__cache_head_encode(again, &e);
        if (memcmp(again, data + off, KILN__CACHE_HEAD_SIZE) != 0)
            abort();
        /* Checking the payload that follows, when it is all there. */
        if (kiln__cache_rec_len(e.size) <= size - off)
            (void)(kiln__cache_record_checksum(&e, data + off + KILN__CACHE_HEAD_SIZE) ==
                   e.checksum);
    }
    return 0;
}

/*
 * fuzz_cache_index.c - the cache's index parser (src/cache/cache_format.h)
 * on arbitrary bytes: header decode, entry decode and the ordering and
 * bounds checks. The first 8 input bytes pick the records file size the
 * entries are checked against.
 */
#include "cache_format.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t rec_size = 0;
    if (size >= 8) {
        memcpy(&rec_size, data, 8);
        data += 8;
        size -= 8;
    }
    size_t cap = size > KILN__CACHE_HEADER_SIZE
                     ? (size - KILN__CACHE_HEADER_SIZE) / KILN__CACHE_ENTRY_SIZE
                     : 0;
    struct kiln_cache_entry *es = malloc((cap ? cap : 1) * sizeof(*es));
    if (!es)
        return 0;
    struct kiln__cache_index_parse p;
    int rc = kiln__cache_index_parse(data, size, rec_size, es, &p);
    /* What the parser promises: counts inside the input, entries in order
     * and inside the records when it says the index is usable. */
    if (p.valid > p.whole || p.whole > cap)
        abort();
    if (rc == KILN_OK) {
        uint64_t next = KILN__CACHE_HEADER_SIZE;
        for (size_t i = 0; i < p.whole; i++) {
            if (es[i].offset < next || es[i].size > KILN_CACHE_MAX_PAYLOAD)
                abort();
            next = es[i].offset + kiln__cache_rec_len(es[i].size);
            if (rec_size && next > rec_size)
                abort();
        }
    } else if (!p.problem) {
        abort();
    }
    free(es);
    return 0;
}

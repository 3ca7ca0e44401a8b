/*
 * fuzz_cache_meta.c - the decoder of the cache's settings file
 * (programs.kpm, src/cache/cache_meta.c) on arbitrary bytes: what it
 * promises is a cap only with no reason given, and none with one.
 */
#include "cache_format.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t cap = 1;
    const char *why = kiln__cache_meta_parse(data, size, &cap);
    if ((why && cap != 0) || (!why && size != 32))
        abort();
    return 0;
}

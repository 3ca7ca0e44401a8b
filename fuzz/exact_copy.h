/*
 * exact_copy.h - a fuzzer's input copied to a heap block of exactly its
 * size, so that AddressSanitizer sees any read past the end (libFuzzer's
 * own buffer may be larger). Header only: each fuzzer is its own program
 * of one source.
 */
#ifndef KILN_FUZZ_EXACT_COPY_H
#define KILN_FUZZ_EXACT_COPY_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* @return the copy (free it), or NULL without memory. */
static inline unsigned char *exact_copy(const uint8_t *data, size_t size)
{
    unsigned char *copy = malloc(size ? size : 1);
    if (copy)
        memcpy(copy, data, size);
    return copy;
}

#endif /* KILN_FUZZ_EXACT_COPY_H */

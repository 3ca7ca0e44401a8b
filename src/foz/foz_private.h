/*
 * foz_private.h - what the files of the foz module share.
 */
#ifndef KILN_FOZ_PRIVATE_H
#define KILN_FOZ_PRIVATE_H

#include "kiln/foz.h"
#include "kiln_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most bytes one entry may inflate to. Fossilize entries are JSON and
 * SPIR-V of at most a few MB; the bound keeps a damaged or crafted size
 * from asking for gigabytes. */
#define KILN__FOZ_MAX_INFLATED ((uint64_t)256 << 20)

/* Deflate cannot expand data more than about 1032:1, so a claimed inflated
 * size above this many times the stored size is damage, found before any
 * allocation. */
#define KILN__FOZ_MAX_RATIO 1040u

/*
 * Parses exactly `n` (1..16) hexadecimal digits into *out.
 * @return whether every character was a hexadecimal digit.
 */
static inline bool kiln__foz_parse_hex(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 16)
        return false;
    for (size_t i = 0; i < n; i++) {
        int d = kiln__hexval((unsigned char)s[i]);
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return true;
}

/*
 * A recorded pipeline's name in every line kiln writes of it (foz_reader.c):
 * "program <key, 32 hex> (<kind> pipeline <hash, 16 hex>)", `key` being the
 * key its program is stored under, so the name prepare and start give it.
 * @return buf. Thread-safe.
 */
const char *kiln__foz_pipeline_label(char *buf, size_t cap, enum kiln_foz_kind kind, uint64_t hash,
                                     struct kiln_key key);

#endif /* KILN_FOZ_PRIVATE_H */

/*
 * pack_varint.h - the stream primitives both SPIR-V transforms write and
 * read with: zigzag for signed deltas, LEB128-style varints, raw words, and
 * the read cursor. Each transform keeps its own varint reader, tuned to the
 * values it writes (format 2 reads two-byte varints without a loop).
 * Private to src/pack.
 */
#ifndef KILN_PACK_VARINT_H
#define KILN_PACK_VARINT_H

#include "kiln_internal.h"

#include <stdint.h>

static inline uint32_t zigzag(uint32_t d)
{
    return (d << 1) ^ (uint32_t) - (int32_t)(d >> 31);
}

static inline uint32_t unzigzag(uint32_t v)
{
    return (v >> 1) ^ (uint32_t) - (int32_t)(v & 1);
}

static inline uint8_t *put_varint(uint8_t *p, uint32_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint8_t *put_word(uint8_t *p, uint32_t w)
{
    kiln__store_le32(p, w);
    return p + 4;
}

struct rs {
    const uint8_t *p;
    const uint8_t *end;
};

#endif /* KILN_PACK_VARINT_H */

/*
 * pack_varint.h - the stream primitives both SPIR-V transforms write and
 * read with: zigzag for signed deltas, LEB128-style varints, raw words, and
 * the read cursor. The readers are KILN_INLINE: they sit in the decoders'
 * inner loops (pack_spirv2.c says what a call there cost). Private to
 * src/pack.
 */
#ifndef KILN_PACK_VARINT_H
#define KILN_PACK_VARINT_H

#include "kiln_internal.h"

#include <stdbool.h>
#include <stddef.h>
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

/* Reads a varint of at most 5 bytes whose value fits 32 bits. One and two
 * bytes (module-level ids of larger modules) are read without a loop. */
KILN_INLINE bool get_varint(struct rs *s, uint32_t *v)
{
    const uint8_t *p = s->p;
    if (KILN_LIKELY(p < s->end && p[0] < 0x80)) {
        *v = p[0];
        s->p = p + 1;
        return true;
    }
    if (KILN_LIKELY(s->end - p >= 2 && p[1] < 0x80)) {
        *v = (uint32_t)(p[0] & 0x7F) | (uint32_t)p[1] << 7;
        s->p = p + 2;
        return true;
    }
    uint32_t r = 0;
    for (unsigned shift = 0; shift < 35; shift += 7) {
        if (p >= s->end)
            return false;
        uint8_t b = *p++;
        if (shift == 28 && b > 0x0F)
            return false;
        r |= (uint32_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *v = r;
            s->p = p;
            return true;
        }
    }
    return false;
}

KILN_INLINE bool get_word(struct rs *s, uint32_t *w)
{
    if ((size_t)(s->end - s->p) < 4)
        return false;
    *w = kiln__load_le32(s->p);
    s->p += 4;
    return true;
}

#endif /* KILN_PACK_VARINT_H */

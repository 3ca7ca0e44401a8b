/*
 * pack_stats.c - opcode classes and the per-class figures of
 * `kiln bench pack`: where a packed blob's bytes go.
 *
 * Design. Each transform's encoder takes a class filter: it follows every
 * instruction (its state, the previous result and target, evolves as in a
 * real encode) but keeps only the stream values of the filtered class's
 * instructions. Compressing that output alone says what the class costs.
 * The figures are for reading, never for decoding: nothing here is stored.
 */
#include "pack_internal.h"

#include <stdlib.h>

unsigned kiln__spirv_op_class(uint32_t op)
{
    switch (op) {
    case 71:
    case 73:
    case 74:
    case 75:
    case 332:
    case 5632:
        return KILN_PACK_CLASS_DECORATION;
    case 72:
    case 5633:
        return KILN_PACK_CLASS_MEMBER_DECORATION;
    case 1:
    case 19:
    case 20:
    case 21:
    case 22:
    case 23:
    case 24:
    case 25:
    case 26:
    case 27:
    case 28:
    case 29:
    case 30:
    case 31:
    case 32:
    case 33:
    case 34:
    case 35:
    case 36:
    case 37:
    case 38:
    case 39:
    case 41:
    case 42:
    case 43:
    case 44:
    case 45:
    case 46:
    case 48:
    case 49:
    case 50:
    case 51:
    case 52:
    case 4472:
    case 5341:
        return KILN_PACK_CLASS_TYPE_CONSTANT;
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 8:
    case 317:
    case 330:
        return KILN_PACK_CLASS_DEBUG;
    case 59:
    case 60:
    case 61:
    case 62:
    case 63:
    case 64:
    case 65:
    case 66:
    case 67:
    case 68:
    case 69:
    case 70:
    case 400:
    case 401:
    case 402:
    case 403:
        return KILN_PACK_CLASS_MEMORY;
    case 12:
        return KILN_PACK_CLASS_EXT_INST;
    case 54:
    case 55:
    case 56:
    case 57:
    case 245:
    case 246:
    case 247:
    case 248:
    case 249:
    case 250:
    case 251:
    case 252:
    case 253:
    case 254:
    case 255:
    case 4416:
        return KILN_PACK_CLASS_CONTROL;
    default:
        break;
    }
    if (op >= 227 && op <= 242)
        return KILN_PACK_CLASS_MEMORY; /* atomics */
    if (op >= 86 && op <= 107)
        return KILN_PACK_CLASS_IMAGE;
    if ((op >= 77 && op <= 84) || (op >= 109 && op <= 215) || (op >= 333 && op <= 366))
        return KILN_PACK_CLASS_ARITHMETIC;
    return KILN_PACK_CLASS_OTHER;
}

static const char *const class_names[KILN_PACK_CLASS_COUNT] = {
    "decoration", "member_decoration", "type_constant", "debug", "memory", "arithmetic",
    "image",      "control",           "ext_inst",      "other",
};

const char *kiln_pack_class_name(enum kiln_pack_class c)
{
    return (unsigned)c < KILN_PACK_CLASS_COUNT ? class_names[c] : NULL;
}

int kiln_pack_class_stats_add(const uint32_t *words, size_t nwords,
                              struct kiln_pack_class_stats *stats)
{
    if (!stats || (nwords && !words))
        return KILN_EINVAL;
    if (nwords < 5 || words[0] != KILN__SPIRV_MAGIC)
        return 0;
    struct kiln__pack_tls *tls = kiln__pack_tls();
    if (!tls)
        return KILN_ENOMEM;
    size_t work = KILN_MAX(kiln__spirv1_work_bound(nwords), kiln__spirv2_work_bound(nwords));
    size_t xbound = KILN_MAX(kiln__spirv1_xform_bound(nwords), kiln__spirv2_xform_bound(nwords));
    size_t zbound = ZSTD_compressBound(xbound);
    KILN_TRY(kiln__pack_tls_xbuf(tls, work + zbound));
    /* A module that does not tile is not transformed: check before counting. */
    if (kiln__spirv2_encode(words, nwords, tls->xbuf, work, -1) < 0)
        return 0;
    uint64_t cw[KILN_PACK_CLASS_COUNT] = {0};
    cw[KILN_PACK_CLASS_OTHER] += 5;
    for (size_t w = 5; w < nwords; w += words[w] >> 16)
        cw[kiln__spirv_op_class(words[w] & 0xFFFF)] += words[w] >> 16;
    for (int t = 0; t < 2; t++) {
        /* Class KILN_PACK_CLASS_COUNT keeps nothing: what every class's
         * output holds anyway (stream sizes, the module header, the zstd
         * frame), taken off each class's figures. */
        size_t empty_x = 0, empty_z = 0;
        for (int c = KILN_PACK_CLASS_COUNT; c >= 0; c--) {
            int64_t xn = t == 0 ? kiln__spirv1_encode(words, nwords, tls->xbuf, work, c)
                                : kiln__spirv2_encode(words, nwords, tls->xbuf, work, c);
            if (xn < 0)
                return (int)xn;
            size_t zn = ZSTD_compressCCtx(tls->cctx, tls->xbuf + work, zbound, tls->xbuf,
                                          (size_t)xn, KILN__KILN_LEVEL);
            if (ZSTD_isError(zn))
                return KILN_ENOMEM;
            if (c == KILN_PACK_CLASS_COUNT) {
                empty_x = (size_t)xn;
                empty_z = zn;
                continue;
            }
            stats->xform_bytes[t][c] += (uint64_t)xn - KILN_MIN(empty_x, (size_t)xn);
            stats->zstd_bytes[t][c] += zn - KILN_MIN(empty_z, zn);
        }
    }
    for (int c = 0; c < KILN_PACK_CLASS_COUNT; c++)
        stats->words[c] += cw[c];
    stats->modules++;
    return 0;
}

/*
 * pack_stats.c - the per-class figures of
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

static const char *const class_names[KILN_PACK_CLASS_COUNT] = {
    "decoration", "member_decoration", "type_constant", "debug", "memory", "arithmetic",
    "image",      "control",           "ext_inst",      "other",
};

const char *kiln_pack_class_name(enum kiln_pack_class c)
{
    return (unsigned)c < KILN_PACK_CLASS_COUNT ? class_names[c] : NULL;
}

static int class_stats_add(const uint32_t *words, size_t nwords,
                           struct kiln_pack_class_stats *stats)
{
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

/* The caller's figures are read into the library's own struct, added to,
 * and written back to the caller's size (docs/abi.md). */
int kiln_pack_class_stats_add(const uint32_t *words, size_t nwords,
                              struct kiln_pack_class_stats *stats)
{
    if (!stats || (nwords && !words))
        return KILN_EINVAL;
    struct kiln_pack_class_stats acc;
    KILN_TRY(KILN_STRUCT_IN(&acc, stats, "kiln_pack_class_stats"));
    int rc = class_stats_add(words, nwords, &acc);
    KILN_STRUCT_OUT(stats, &acc);
    return rc;
}

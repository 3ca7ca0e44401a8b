/*
 * pack_internal.h - what the pack module's files share: the SPIR-V
 * transform, the per-thread state and the dictionary's insides.
 */
#ifndef KILN_PACK_INTERNAL_H
#define KILN_PACK_INTERNAL_H

#include "kiln/pack.h"
#include "kiln_internal.h"

#include <zstd.h>

/* SPIR-V's magic number, as a host-order word. */
#define KILN__SPIRV_MAGIC 0x07230203u

struct kiln_pack_dict {
    uint64_t id;       /* kiln_hash64 of the zstd dictionary's bytes */
    void *bytes;       /* serialized form: the .kpd header, then the zstd dictionary */
    size_t size;       /* of `bytes` */
    ZSTD_CDict *cdict; /* digested for compression at the kiln codec's level */
    ZSTD_DDict *ddict; /* digested for decompression */
};

/* The zstd level of the kiln codec, after the transform. Level 3 is within
 * about 3% of level 5 in size on both kinds of corpus and packs about 1.5x
 * faster (docs/pack-format.md). */
#define KILN__KILN_LEVEL 3

/* Per-thread state: contexts and buffers reused by every call. */
struct kiln__pack_tls {
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    uint8_t *xbuf; /* transformed streams */
    size_t xcap;
    uint32_t *scratch;  /* kiln_unpack_scratch's buffer */
    size_t scratch_cap; /* in words */
};

/* @return this thread's state (made on first use), or NULL when out of memory. */
struct kiln__pack_tls *kiln__pack_tls(void);

/* Makes sure tls->xbuf holds at least `n` bytes. @return 0 or KILN_ENOMEM. */
int kiln__pack_tls_xbuf(struct kiln__pack_tls *tls, size_t n);

/*
 * The SPIR-V transform (pack_spirv.c). Its output for `nwords` words is
 * never longer than kiln__spirv_xform_bound(nwords); the encoder needs a
 * work buffer of kiln__spirv_work_bound(nwords) bytes to make it.
 */
size_t kiln__spirv_xform_bound(size_t nwords);
size_t kiln__spirv_work_bound(size_t nwords);

/*
 * Transforms a module into kiln's stream form, in `dst` (`cap` bytes, at
 * least kiln__spirv_work_bound(nwords)).
 * @return the bytes written to `dst`, or KILN_EFORMAT when the words are not
 * a parseable SPIR-V module (the caller then uses another codec).
 */
int64_t kiln__spirv_encode(const uint32_t *words, size_t nwords, uint8_t *dst, size_t cap);

/*
 * Turns the stream form back into exactly `nwords` words in `out`. Every
 * read is bounds-checked.
 * @return 0, or KILN_ECORRUPT_BLOB when the streams are damaged or do not
 * make exactly `nwords` words.
 */
int kiln__spirv_decode(const uint8_t *src, size_t n, uint32_t *out, size_t nwords);

#endif /* KILN_PACK_INTERNAL_H */

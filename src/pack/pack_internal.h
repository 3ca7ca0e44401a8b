/*
 * pack_internal.h - what the pack module's files share: the SPIR-V
 * transforms, the per-thread state and the dictionary's insides.
 */
#ifndef KILN_PACK_INTERNAL_H
#define KILN_PACK_INTERNAL_H

#include "kiln/pack.h"
#include "kiln_internal.h"

/* Magicless frames (ZSTD_c_format) and dictionary parameters. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

/* zstd's allocator: kiln's own (kiln__malloc, kiln__free), so that every
 * context and digested dictionary goes through the application's
 * allocator. */
static inline void *kiln__zstd_alloc(void *opaque, size_t n)
{
    (void)opaque;
    return kiln__malloc(n);
}

static inline void kiln__zstd_free(void *opaque, void *p)
{
    (void)opaque;
    kiln__free(p);
}

static inline ZSTD_customMem kiln__zstd_mem(void)
{
    ZSTD_customMem mem = {kiln__zstd_alloc, kiln__zstd_free, NULL};
    return mem;
}

/* SPIR-V's magic number, as a host-order word. */
#define KILN__SPIRV_MAGIC 0x07230203u

/* The serialized dictionary's header; the zstd dictionary follows it. */
#define KILN__KPD_HEAD 16u

struct kiln_pack_dict {
    uint64_t id;             /* kiln_hash64 of the zstd dictionary's bytes */
    void *bytes;             /* serialized form: the .kpd header, then the zstd dictionary */
    size_t size;             /* of `bytes` */
    ZSTD_CDict *cdict;       /* digested for compression of small modules */
    ZSTD_CDict *cdict_large; /* and of large ones (KILN__LARGE_BYTES); NULL in the built-in one */
    ZSTD_DDict *ddict;       /* digested for decompression */
};

/* The zstd level of the kiln codec without a dictionary, after the
 * transform (docs/pack-format.md has the measurements behind it). Format 1
 * blobs were made at level 3. */
#define KILN__KILN_LEVEL 5
/* Modules over this many SPIR-V bytes are compressed at KILN__LARGE_LEVEL:
 * they compress well at any level, and time is what they cost. */
#define KILN__LARGE_BYTES (64u << 10)
#define KILN__LARGE_LEVEL 3
/* Format 4 stores literals raw in modules of at least this many SPIR-V
 * bytes, whatever the dictionary: from here on zstd writes a Huffman table
 * of its own for nearly every blob, and decoding the literals with it costs
 * more at unpack than the 2-5% of bytes it saves (docs/pack-format.md). */
#define KILN__RAW_LITERALS_BYTES (16u << 10)
/* With a dictionary: small modules at level 6's lazy matching with tables
 * of 2^15 entries, large ones at KILN__LARGE_LEVEL. */
#define KILN__DICT_LEVEL     6
#define KILN__DICT_TABLE_LOG 15
/* KILN_PACK_LEVEL_MAX, the shipping level: the zstd level of every kiln-codec
 * module, with literals stored raw and matches of at least
 * KILN__MAX_MIN_MATCH bytes (docs/pack-format.md, "Levels", has the
 * measurements behind it). */
#define KILN__MAX_LEVEL     19
#define KILN__MAX_MIN_MATCH 4
/* The default level's check that the built-in dictionary made a module no
 * larger: the module's streams at this zstd level without a dictionary. */
#define KILN__PLAIN_LEVEL 3

/*
 * The id of the built-in dictionary (kiln_hash64 of its zstd bytes,
 * pack_builtin_dict.inc): blob format 4 packs modules of up to
 * KILN__LARGE_BYTES with it when the caller gives no dictionary (larger
 * ones gain little from it and unpack slower). Pinned, because those blobs
 * name it by their format and size alone.
 */
#define KILN__BUILTIN_DICT_ID UINT64_C(0x52555c98183cc978)

/* @return the built-in dictionary, made on first use (thread-safe), or
 * NULL when out of memory. */
const struct kiln_pack_dict *kiln__pack_builtin(void);

/* Per-thread state: contexts and buffers reused by every call. */
/* Decompression contexts a thread keeps bound to one dictionary each: the
 * built-in one and two of the caller's. */
#define KILN__DICT_DCTX 3

struct kiln__pack_tls {
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx; /* blobs without a dictionary (made on first use) */
    /* Blobs with one: a context per dictionary recently used (the least
     * recently used one is rebound), keyed by the ZSTD_DDict. */
    ZSTD_DCtx *ddctx[KILN__DICT_DCTX];
    const void *ddctx_key[KILN__DICT_DCTX];
    unsigned ddctx_last;
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
 * The SPIR-V transforms: 1 (pack_spirv.c, blob format 1, kept so that old
 * blobs unpack) and 2 (pack_spirv2.c, what kiln_pack makes). A transform's
 * output for `nwords` words is never longer than its xform_bound(nwords);
 * the encoder needs a work buffer of work_bound(nwords) bytes to make it.
 *
 * encode transforms a module into stream form, in `dst` (`cap` bytes, at
 * least work_bound(nwords)). With `only_class` >= 0 it writes only the
 * values of instructions of that opcode class (kiln__spirv_op_class), for
 * the bench's per-class figures; such output does not decode.
 * @return the bytes written, or KILN_EFORMAT when the words are not a
 * parseable SPIR-V module (the caller then uses another codec).
 *
 * decode turns the stream form back into exactly `nwords` words in `out`.
 * Every read is bounds-checked. Transform 2's decoder needs
 * kiln__spirv2_decode_scratch(nwords) bytes of `scratch`.
 * @return 0, or KILN_ECORRUPT_BLOB when the streams are damaged or do not
 * make exactly `nwords` words.
 */
size_t kiln__spirv1_xform_bound(size_t nwords);
size_t kiln__spirv1_work_bound(size_t nwords);
int64_t kiln__spirv1_encode(const uint32_t *words, size_t nwords, uint8_t *dst, size_t cap,
                            int only_class);
int kiln__spirv1_decode(const uint8_t *src, size_t n, uint32_t *out, size_t nwords);

size_t kiln__spirv2_xform_bound(size_t nwords);
size_t kiln__spirv2_work_bound(size_t nwords);
int64_t kiln__spirv2_encode(const uint32_t *words, size_t nwords, uint8_t *dst, size_t cap,
                            int only_class);
size_t kiln__spirv2_decode_scratch(size_t nwords);
int kiln__spirv2_decode(const uint8_t *src, size_t n, uint32_t *out, size_t nwords,
                        uint8_t *scratch);

/*
 * kiln_pack, making blob format 1 (transform 1) as kiln did before format 2:
 * for tests of the format-1 decoder only.
 */
int kiln__pack_format1(const uint32_t *words, size_t nwords, enum kiln_codec codec,
                       const struct kiln_pack_dict *dict, void **blob, size_t *blob_size);

/*
 * kiln_pack, making blob format 2 (transform 2, the checksum over the
 * SPIR-V) as kiln did before format 3: for tests of the format-2 reader.
 */
int kiln__pack_format2(const uint32_t *words, size_t nwords, enum kiln_codec codec,
                       const struct kiln_pack_dict *dict, void **blob, size_t *blob_size);

/*
 * kiln_pack, making blob format 3 (no built-in dictionary: the kiln codec
 * without a caller's dictionary uses none) as kiln did before format 4: for
 * tests of the format-3 reader.
 */
int kiln__pack_format3(const uint32_t *words, size_t nwords, enum kiln_codec codec,
                       const struct kiln_pack_dict *dict, void **blob, size_t *blob_size);

/*
 * The kiln codec's blob of a module packed without any dictionary at zstd
 * `level` (format 3's kind, as kiln_pack writes it when the built-in
 * dictionary would make the module larger): for the tests of that rule.
 */
int kiln__pack_plain(const uint32_t *words, size_t nwords, int level, void **blob,
                     size_t *blob_size);

/* @return a blob's format (1 to 4), or KILN_ECORRUPT_BLOB. */
int kiln__blob_format(const void *blob, size_t blob_size);

/*
 * The seal a format-3 or -4 blob with these bytes carries when packed with
 * the caller's dictionary whose id is `dict_id` (ignored without one, and
 * for a blob packed with the built-in dictionary).
 * @return the seal, KILN_EINVAL for another format, or KILN_ECORRUPT_BLOB.
 */
int64_t kiln__blob_seal(const void *blob, size_t blob_size, uint64_t dict_id);

/* Rewrites a format-3 or -4 blob's seal to match its bytes, so that the fuzzer
 * reaches the decoders behind it. @return 0 or kiln__blob_seal's error. */
int kiln__blob_reseal(void *blob, size_t blob_size, uint64_t dict_id);

/* The opcode class of an opcode (enum kiln_pack_class). */
unsigned kiln__spirv_op_class(uint32_t op);

/*
 * Operand shapes per opcode, shared by both transforms (pack_spirv.c has
 * the table). Format 1 depends on this table: never change an entry.
 */
enum {
    KILN__K_NONE = 0,
    KILN__K_TYPE,   /* result type id */
    KILN__K_RES,    /* result id */
    KILN__K_ID,     /* id operand */
    KILN__K_TARGET, /* decoration/name target, delta from the previous target */
    KILN__K_LIT,    /* small literal */
    KILN__K_WORD,   /* literal word */
    KILN__K_STR,    /* literal string: words up to one whose top byte is 0 */
};

#define KILN__SHAPE_FIXED 8u
/* Opcodes below this have a slot of their own: kiln__shape_slot(op) == op. */
#define KILN__SHAPE_OPS 512u
/* At least kiln__shape_slots(). */
#define KILN__SHAPE_SLOTS_MAX 600u

struct kiln__shape {
    uint8_t nfixed;
    uint8_t rest;       /* kind of every operand after the fixed ones */
    uint8_t has_result; /* the instruction defines a result id */
    uint8_t fixed[KILN__SHAPE_FIXED];
    /*
     * The fast path: an instruction of at most `fast_wc` words whose
     * operands are an optional prefix (none, R, or T R) then only ids is
     * coded by straight-line code instead of a switch per operand. It reads
     * and writes the streams in the same order as the general path.
     */
    uint8_t fast_prefix; /* KILN__FAST_NONE, _R, _TR */
    uint16_t fast_wc;    /* 0: never */
};

enum { KILN__FAST_NONE = 0, KILN__FAST_R = 1, KILN__FAST_TR = 2 };

/* The shape table: kiln__shape_slots() entries, the last the default
 * (every operand a literal) for opcodes without one; the usual word count
 * per slot in *default_len. Made once, thread-safe. */
const struct kiln__shape *kiln__shapes(const uint16_t **default_len);
unsigned kiln__shape_slots(void);

/* The table slot of an opcode. */
unsigned kiln__shape_slot(uint32_t op);

#endif /* KILN_PACK_INTERNAL_H */

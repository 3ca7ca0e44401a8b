/*
 * pack.c - packed SPIR-V blobs: the header, the codecs and the per-thread
 * contexts.
 *
 * Design. A blob is a short header and the codec's payload. Format 4,
 * what kiln_pack makes:
 *
 *   u8      kind: 0xE0 | codec (bits 0-1) | 0x04 when the caller's
 *           dictionary was used | 0x08 (and 0x10 if compressed) when the
 *           payload is one block
 *   varint  SPIR-V size in words (at most KILN_PACK_MAX_SPIRV_BYTES / 4)
 *   u32     the seal: the low 32 bits of XXH3-64 of the payload, seeded
 *           with the kind, the word count and the dictionary's whole id
 *   u16     the low 16 bits of the dictionary's id, only with 0x04
 *   payload (raw: the SPIR-V; zstd: one magicless zstd frame of the SPIR-V;
 *            kiln: one magicless zstd frame of transform 2's streams, made
 *            with the caller's dictionary, or else the built-in one for
 *            modules of up to KILN__LARGE_BYTES, its literals stored raw;
 *            raw too in modules from KILN__RAW_LITERALS_BYTES on)
 *
 * Format 3 (kind 0xC0 | ...), which kiln_pack made before format 4 and
 * kiln_unpack still reads, is the same but for the built-in dictionary: a
 * kiln-codec blob without 0x04 was packed with no dictionary. Format 2
 * (0xA0 | ...) is format 3 but for the u32: the low 32 bits of XXH3-64
 * (kiln_hash64) of the SPIR-V bytes, checked after decoding.
 *
 * Format 1, which kiln_pack made before and kiln_unpack still reads, is a
 * fixed header: 'K', 1, codec, flags (bit 0: dictionary), u32 SPIR-V
 * bytes, u64 XXH3-64, then the u64 dictionary id when flag bit 0 is set;
 * then the payload with zstd's magic, the kiln codec's made by transform 1.
 * The first byte tells the formats apart ('K' is never a format-2, -3 or
 * -4 kind).
 *
 * Invariants, and why they hold:
 * - A damaged blob never unpacks to wrong SPIR-V without an error. Formats
 *   3 and 4: the seal covers every byte of the blob (the header through the
 *   seed, the payload hashed) and the dictionary's whole id, and is checked
 *   before anything is decoded; the decoders are deterministic and
 *   lossless (tested on the corpus and fuzzed), so bytes that pass the
 *   seal decode to the module that was packed. Formats 1 and 2: the header
 *   carries the checksum of the SPIR-V, and the output is checked against
 *   it (and the size) before success is returned. Hashing the packed bytes
 *   instead of the output costs a fifth to a ninth of the bytes.
 * - Decoding never reads or writes out of bounds: the header is read only
 *   after its length is checked, zstd is given exact capacities, and the
 *   transform's decoder checks every read (pack_spirv.c).
 * - Contexts are never made per call: each thread has one ZSTD_CCtx, a
 *   ZSTD_DCtx for blobs without a dictionary, one for each of the
 *   dictionaries it used last (dict_dctx) and its buffers, each made on
 *   first use and freed by a pthread key destructor when the thread exits
 *   (or by kiln_pack_thread_cleanup).
 * - A format-4 blob of the kiln codec always unpacks without the caller's
 *   dictionary when it was packed without one: the built-in dictionary is
 *   in the library, and its bytes are pinned (pack_dict.c).
 *
 * Blobs hold SPIR-V words in little-endian byte order; kiln builds on
 * little-endian hosts only, so a word array is its own byte form.
 */
#include "pack_internal.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kiln's packed blobs assume a little-endian host"
#endif

/* Format 1. */
#define BLOB_MAGIC     0x4Bu /* 'K' */
#define BLOB_VERSION   1u
#define BLOB_FLAG_DICT 0x01u
#define BLOB_HEAD      16u
#define BLOB_HEAD_DICT 24u

/* Formats 2 to 4: the same layout, told apart by the kind's top bits. */
#define KIND_TAG2     0xA0u
#define KIND_TAG3     0xC0u
#define KIND_TAG4     0xE0u
#define KIND_TAG_MASK 0xE0u
#define KIND_BLOCK_Z  0x10u /* the one block is compressed (else stored) */
#define KIND_BLOCK    0x08u /* the payload is one block's content, not a frame */
#define KIND_DICT     0x04u
#define KIND_CODEC    0x03u
/* The frame header that a payload of one block stands for: no content
 * size, checksum or dictionary id (so 0), and a 128 KiB window. */
#define FRAME_FHD 0x00u
#define FRAME_WD  0x38u

/* ---- per-thread state --------------------------------------------------- */

static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static pthread_key_t tls_key;
static bool tls_key_ok;

static void tls_free(void *p)
{
    struct kiln__pack_tls *tls = p;
    if (!tls)
        return;
    ZSTD_freeCCtx(tls->cctx);
    ZSTD_freeDCtx(tls->dctx);
    for (int i = 0; i < KILN__DICT_DCTX; i++)
        ZSTD_freeDCtx(tls->ddctx[i]);
    kiln__free(tls->xbuf);
    kiln__free(tls->scratch);
    kiln__free(tls);
}

static void tls_init(void)
{
    tls_key_ok = pthread_key_create(&tls_key, tls_free) == 0;
}

struct kiln__pack_tls *kiln__pack_tls(void)
{
    pthread_once(&tls_once, tls_init);
    if (!tls_key_ok)
        return NULL;
    struct kiln__pack_tls *tls = pthread_getspecific(tls_key);
    if (KILN_LIKELY(tls != NULL))
        return tls;
    tls = kiln__calloc(1, sizeof(*tls));
    if (!tls)
        return NULL;
    tls->cctx = ZSTD_createCCtx_advanced(kiln__zstd_mem());
    if (!tls->cctx || pthread_setspecific(tls_key, tls) != 0) {
        tls_free(tls);
        return NULL;
    }
    return tls;
}

void kiln_pack_thread_cleanup(void)
{
    pthread_once(&tls_once, tls_init);
    if (!tls_key_ok)
        return;
    struct kiln__pack_tls *tls = pthread_getspecific(tls_key);
    if (tls) {
        pthread_setspecific(tls_key, NULL);
        tls_free(tls);
    }
}

int kiln__pack_tls_xbuf(struct kiln__pack_tls *tls, size_t n)
{
    if (tls->xcap >= n)
        return 0;
    void *p = kiln__realloc(tls->xbuf, n);
    if (!p)
        return KILN_ENOMEM;
    tls->xbuf = p;
    tls->xcap = n;
    return 0;
}

/* ---- header ------------------------------------------------------------- */

struct blob_head {
    unsigned format; /* 1 to 4 */
    enum kiln_codec codec;
    bool dict;    /* packed with a caller's dictionary, named in the header */
    bool builtin; /* format 4's kiln codec without one: the built-in dictionary */
    uint32_t spirv_bytes;
    uint64_t checksum; /* format 1: XXH3-64 of the SPIR-V; 2: its low 32 bits; 3, 4: the seal */
    uint64_t dict_id;  /* format 1: the id; formats 2 to 4: its low 16 bits */
    size_t head_size;
    unsigned kind;  /* formats 2 to 4: the kind byte */
    unsigned block; /* formats 2 to 4: 0 (a frame), or KIND_BLOCK with KIND_BLOCK_Z if compressed */
};

/*
 * The checksum of formats 3 and 4, the seal: the low 32 bits of XXH3-64 of
 * the payload, seeded with the kind byte, the word count and the whole
 * 64-bit id of the dictionary (the built-in one's too; 0 without one). So
 * damage anywhere in the blob, or a dictionary that shares the id's low 16
 * bits with the right one, fails the seal before anything is decoded.
 */
static uint32_t blob_seal(unsigned kind, uint32_t words, uint64_t dict_id, const void *payload,
                          size_t n)
{
    uint64_t seed = dict_id ^ (((uint64_t)words << 8 | kind) * 0x9E3779B97F4A7C15ull);
    return (uint32_t)XXH3_64bits_withSeed(payload, n, seed);
}

/* Writes a header of `format` into `p` (room for BLOB_HEAD_DICT bytes);
 * `dict` is the caller's dictionary, NULL for none or the built-in one.
 * @return its size. */
static size_t write_head(uint8_t *p, unsigned format, enum kiln_codec codec,
                         const struct kiln_pack_dict *dict, uint32_t spirv_bytes, uint64_t checksum,
                         unsigned block)
{
    if (format == 1) {
        p[0] = BLOB_MAGIC;
        p[1] = BLOB_VERSION;
        p[2] = (uint8_t)codec;
        p[3] = dict ? BLOB_FLAG_DICT : 0;
        kiln__store_le32(p + 4, spirv_bytes);
        kiln__store_le64(p + 8, checksum);
        if (!dict)
            return BLOB_HEAD;
        kiln__store_le64(p + 16, dict->id);
        return BLOB_HEAD_DICT;
    }
    uint8_t *q = p;
    static const uint8_t tags[] = {0, 0, KIND_TAG2, KIND_TAG3, KIND_TAG4};
    *q++ = (uint8_t)(tags[format] | block | (unsigned)codec | (dict ? KIND_DICT : 0));
    for (uint32_t v = spirv_bytes / 4;; v >>= 7) {
        *q++ = (uint8_t)(v < 0x80 ? v : (v & 0x7F) | 0x80);
        if (v < 0x80)
            break;
    }
    kiln__store_le32(q, (uint32_t)checksum);
    q += 4;
    if (dict) {
        kiln__store_le16(q, (uint16_t)dict->id);
        q += 2;
    }
    return (size_t)(q - p);
}

static int read_head1(const uint8_t *p, size_t blob_size, struct blob_head *h)
{
    if (blob_size < BLOB_HEAD || p[1] != BLOB_VERSION || p[2] > KILN_CODEC_KILN ||
        (p[3] & ~BLOB_FLAG_DICT) != 0)
        return KILN_ECORRUPT_BLOB;
    h->format = 1;
    h->kind = 0;
    h->block = 0;
    h->codec = (enum kiln_codec)p[2];
    h->dict = (p[3] & BLOB_FLAG_DICT) != 0;
    h->spirv_bytes = kiln__load_le32(p + 4);
    h->checksum = kiln__load_le64(p + 8);
    h->dict_id = 0;
    h->head_size = BLOB_HEAD;
    if (h->spirv_bytes % 4 != 0 || h->spirv_bytes > KILN_PACK_MAX_SPIRV_BYTES)
        return KILN_ECORRUPT_BLOB;
    if (h->dict) {
        if (blob_size < BLOB_HEAD_DICT)
            return KILN_ECORRUPT_BLOB;
        h->dict_id = kiln__load_le64(p + 16);
        h->head_size = BLOB_HEAD_DICT;
    }
    return 0;
}

/*
 * Whether a kiln-codec blob of `format` packed without the caller's
 * dictionary was packed with the built-in one. The writer chooses by it and
 * the reader reads a blob by it: format 4's blobs do not name the built-in
 * dictionary, so the two must agree forever.
 */
static bool packs_with_builtin(unsigned format, bool caller_dict, uint32_t spirv_bytes)
{
    return format >= 4 && !caller_dict && spirv_bytes <= KILN__LARGE_BYTES;
}

static int read_head2(const uint8_t *p, size_t blob_size, struct blob_head *h)
{
    unsigned tag = p[0] & KIND_TAG_MASK;
    if ((tag != KIND_TAG2 && tag != KIND_TAG3 && tag != KIND_TAG4) ||
        (p[0] & KIND_CODEC) > KILN_CODEC_KILN)
        return KILN_ECORRUPT_BLOB;
    h->format = tag == KIND_TAG2 ? 2 : tag == KIND_TAG3 ? 3 : 4;
    h->kind = p[0];
    h->codec = (enum kiln_codec)(p[0] & KIND_CODEC);
    h->dict = (p[0] & KIND_DICT) != 0;
    h->block = p[0] & (KIND_BLOCK | KIND_BLOCK_Z);
    /* A stored block is KIND_BLOCK alone; the raw codec has no frame. */
    if (h->block == KIND_BLOCK_Z || (h->block && h->codec == KILN_CODEC_RAW))
        return KILN_ECORRUPT_BLOB;
    /* The word count: a varint of at most 4 bytes (2^26 words at most). */
    size_t i = 1;
    uint32_t words = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (i >= blob_size || shift > 21)
            return KILN_ECORRUPT_BLOB;
        uint8_t b = p[i++];
        words |= (uint32_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
    }
    if (words > KILN_PACK_MAX_SPIRV_BYTES / 4 || blob_size - i < 4)
        return KILN_ECORRUPT_BLOB;
    h->spirv_bytes = words * 4;
    h->builtin =
        h->codec == KILN_CODEC_KILN && packs_with_builtin(h->format, h->dict, h->spirv_bytes);
    h->checksum = kiln__load_le32(p + i);
    i += 4;
    h->dict_id = 0;
    if (h->dict) {
        if (blob_size - i < 2)
            return KILN_ECORRUPT_BLOB;
        h->dict_id = kiln__load_le16(p + i);
        i += 2;
    }
    h->head_size = i;
    return 0;
}

static int read_head(const void *blob, size_t blob_size, struct blob_head *h)
{
    const uint8_t *p = blob;
    if (!blob || blob_size < 1)
        return KILN_ECORRUPT_BLOB;
    h->builtin = false;
    KILN_TRY(p[0] == BLOB_MAGIC ? read_head1(p, blob_size, h) : read_head2(p, blob_size, h));
    /* Only the kiln codec uses a dictionary. */
    if (h->dict && h->codec != KILN_CODEC_KILN)
        return KILN_ECORRUPT_BLOB;
    if (h->codec == KILN_CODEC_RAW && blob_size - h->head_size != h->spirv_bytes)
        return KILN_ECORRUPT_BLOB;
    return 0;
}

int kiln_blob_info(const void *blob, size_t blob_size, enum kiln_codec *codec, size_t *spirv_bytes)
{
    if (!blob)
        return KILN_EINVAL;
    struct blob_head h;
    KILN_TRY(read_head(blob, blob_size, &h));
    if (codec)
        *codec = h.codec;
    if (spirv_bytes)
        *spirv_bytes = h.spirv_bytes;
    return 0;
}

/* ---- packing ------------------------------------------------------------ */

static bool is_spirv(const uint32_t *words, size_t nwords)
{
    return words && nwords >= 5 && words[0] == KILN__SPIRV_MAGIC;
}

/* Formats 3 and 4: writes the seal of the blob `b` (header of `hs` bytes,
 * made with checksum 0), packed with the dictionary `dict_id` (0: none),
 * into its header. */
static void seal_blob(uint8_t *b, size_t hs, size_t size, size_t nwords, uint64_t dict_id)
{
    size_t at = hs - 4 - (b[0] & KIND_DICT ? 2 : 0);
    kiln__store_le32(b + at, blob_seal(b[0], (uint32_t)nwords, dict_id, b + hs, size - hs));
}

static int pack_raw(unsigned format, const uint32_t *words, size_t nwords, uint64_t checksum,
                    void **blob, size_t *blob_size)
{
    size_t bytes = nwords * 4;
    uint8_t head[BLOB_HEAD_DICT];
    size_t hs = write_head(head, format, KILN_CODEC_RAW, NULL, (uint32_t)bytes, checksum, 0);
    uint8_t *b = kiln__malloc(hs + bytes);
    if (!b)
        return KILN_ENOMEM;
    memcpy(b, head, hs);
    if (bytes)
        memcpy(b + hs, words, bytes);
    if (format >= 3)
        seal_blob(b, hs, hs + bytes, nwords, 0);
    *blob = b;
    *blob_size = hs + bytes;
    return 0;
}

/* Allocates the blob at its exact size (it is kept for a long time), and
 * seals it with the id of the dictionary it was packed with (0: none). */
static int finish_blob(unsigned format, size_t nwords, uint64_t dict_id, const uint8_t *head,
                       size_t head_size, const void *payload, size_t payload_size, void **blob,
                       size_t *blob_size)
{
    uint8_t *b = kiln__malloc(head_size + payload_size);
    if (!b)
        return KILN_ENOMEM;
    memcpy(b, head, head_size);
    memcpy(b + head_size, payload, payload_size);
    if (format >= 3)
        seal_blob(b, head_size, head_size + payload_size, nwords, dict_id);
    *blob = b;
    *blob_size = head_size + payload_size;
    return 0;
}

/* What one call packs with: kiln_pack_options, read, and the format. */
struct pack_req {
    unsigned format;
    enum kiln_codec codec;
    int level; /* KILN_PACK_LEVEL_DEFAULT, 1 to 22, or KILN_PACK_LEVEL_MAX */
    const struct kiln_pack_dict *dict;
    bool plain; /* the kiln codec without any dictionary, format 3's kind (tests) */
    bool raw;   /* literals raw in every module (the shipping level's rule) */
};

/* How one zstd frame is made. */
struct frame_opts {
    unsigned format;
    int level;
    /* The dictionary, or NULL. With `cdict` it is used as digested there
     * (at the default level's parameters); without, it is loaded at
     * `level` (slower: for the numbered levels and the shipping one). */
    const struct kiln_pack_dict *dict;
    const ZSTD_CDict *cdict;
    bool raw_literals; /* literals stored as they are instead of Huffman-coded */
    int min_match;     /* zstd's shortest match; 0: the level's */
};

/*
 * One zstd frame of `src` into `dst`: no dictionary id and no checksum in
 * the frame (the blob header has both); format 2's frames without zstd's
 * magic number either. @return its size, or a zstd error code.
 */
static size_t zstd_frame(ZSTD_CCtx *c, const struct frame_opts *o, void *dst, size_t cap,
                         const void *src, size_t n)
{
    size_t rc = ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(rc))
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, o->level);
    if (!ZSTD_isError(rc))
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_dictIDFlag, 0);
    if (!ZSTD_isError(rc))
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0);
    if (!ZSTD_isError(rc) && o->format >= 2)
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_format, ZSTD_f_zstd1_magicless);
    /* No content size either: the decoder has room for the bound. */
    if (!ZSTD_isError(rc) && o->format >= 2)
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
    if (!ZSTD_isError(rc) && o->cdict)
        rc = ZSTD_CCtx_refCDict(c, o->cdict);
    else if (!ZSTD_isError(rc) && o->dict)
        rc = ZSTD_CCtx_loadDictionary_byReference(
            c, (const uint8_t *)o->dict->bytes + KILN__KPD_HEAD, o->dict->size - KILN__KPD_HEAD);
    if (!ZSTD_isError(rc) && o->raw_literals)
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
    if (!ZSTD_isError(rc) && o->min_match)
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_minMatch, o->min_match);
    size_t out = ZSTD_isError(rc) ? rc : ZSTD_compress2(c, dst, cap, src, n);
    if (o->dict)
        ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters); /* drops the dictionary */
    return out;
}

/*
 * Format 2 keeps a frame of one block as that block's content alone: such
 * frames differ only in the block's type and size, which the kind byte and
 * the blob's size hold. @return the bytes to drop from the frame's front
 * (0 to keep it whole), and the kind bits in *block.
 */
static size_t strip_frame(const uint8_t *z, size_t n, unsigned *block)
{
    *block = 0;
    if (n < 5 || z[0] != FRAME_FHD)
        return 0;
    uint32_t bh = (uint32_t)z[2] | (uint32_t)z[3] << 8 | (uint32_t)z[4] << 16;
    uint32_t type = bh >> 1 & 3, size = bh >> 3;
    if (!(bh & 1) || (type != 0 && type != 2) || size != n - 5 || size > ZSTD_BLOCKSIZE_MAX)
        return 0;
    *block = KIND_BLOCK | (type == 2 ? KIND_BLOCK_Z : 0);
    return 5;
}

/* Makes the frame that a one-block payload stands for, in `dst` (n + 5
 * bytes). @return false when the payload is too long to be one block. */
static bool rebuild_frame(uint8_t *dst, const uint8_t *payload, size_t n, unsigned block)
{
    if (n > ZSTD_BLOCKSIZE_MAX)
        return false;
    uint32_t bh = 1u | (block & KIND_BLOCK_Z ? 2u : 0u) << 1 | (uint32_t)n << 3;
    dst[0] = FRAME_FHD;
    dst[1] = FRAME_WD;
    dst[2] = (uint8_t)bh;
    dst[3] = (uint8_t)(bh >> 8);
    dst[4] = (uint8_t)(bh >> 16);
    memcpy(dst + 5, payload, n);
    return true;
}

static int pack_zstd(struct kiln__pack_tls *tls, const struct pack_req *q, const uint32_t *words,
                     size_t nwords, uint64_t checksum, void **blob, size_t *blob_size)
{
    size_t bytes = nwords * 4;
    size_t bound = ZSTD_compressBound(bytes);
    KILN_TRY(kiln__pack_tls_xbuf(tls, bound));
    int level = q->level == KILN_PACK_LEVEL_MAX ? KILN__MAX_LEVEL : q->level ? q->level : 1;
    struct frame_opts o = {.format = q->format, .level = level};
    size_t n = q->format == 1 ? ZSTD_compressCCtx(tls->cctx, tls->xbuf, bound, words, bytes, 1)
                              : zstd_frame(tls->cctx, &o, tls->xbuf, bound, words, bytes);
    if (ZSTD_isError(n)) {
        KILN_ERROR("pack", "zstd compression of %zu bytes failed: %s", bytes, ZSTD_getErrorName(n));
        return KILN_ENOMEM;
    }
    unsigned block = 0;
    size_t skip = q->format >= 2 ? strip_frame(tls->xbuf, n, &block) : 0;
    uint8_t head[BLOB_HEAD_DICT];
    size_t hs =
        write_head(head, q->format, KILN_CODEC_ZSTD, NULL, (uint32_t)bytes, checksum, block);
    return finish_blob(q->format, nwords, 0, head, hs, tls->xbuf + skip, n - skip, blob, blob_size);
}

/*
 * The frame options of the kiln codec for a module of `nwords` words packed
 * with `use` (the caller's dictionary, the built-in one, or NULL).
 */
static struct frame_opts kiln_frame_opts(const struct pack_req *q, size_t nwords,
                                         const struct kiln_pack_dict *use, bool builtin)
{
    bool large = nwords * 4 > KILN__LARGE_BYTES;
    struct frame_opts o = {.format = q->format, .dict = use};
    if (q->format == 1) {
        o.level = 3;
    } else if (q->level == KILN_PACK_LEVEL_DEFAULT) {
        o.level = large ? KILN__LARGE_LEVEL : KILN__KILN_LEVEL;
        o.cdict = use ? large ? use->cdict_large : use->cdict : NULL;
    } else {
        o.level = q->level == KILN_PACK_LEVEL_MAX ? KILN__MAX_LEVEL : q->level;
    }
    /* Format 4 stores literals raw with the built-in dictionary: a small
     * module's literals would otherwise bring a Huffman table that zstd
     * builds again at every unpack (about a quarter of the instructions of
     * unpacking a typical shader), for about 6% more bytes. So it does for
     * every module from KILN__RAW_LITERALS_BYTES, where each blob brings a
     * table of its own too. Small modules packed with the caller's
     * dictionary keep Huffman-coded literals: mostly the dictionary's
     * table, which costs nothing to unpack (pack-format.md). */
    o.raw_literals = q->format >= 4 && (builtin || nwords * 4 >= KILN__RAW_LITERALS_BYTES);
    /* The shipping level: literals raw in every module, and matches of at
     * least 4 bytes. zstd's strongest levels write a Huffman table of their
     * own for most small blobs and many 3-byte matches, and both cost more
     * at unpack than they save (pack-format.md, "Levels"). */
    if (q->level == KILN_PACK_LEVEL_MAX || q->raw)
        o.raw_literals = true;
    if (q->level == KILN_PACK_LEVEL_MAX)
        o.min_match = KILN__MAX_MIN_MATCH;
    return o;
}

/* A candidate payload of one module, in the thread's work buffer, and the
 * format and dictionary its blob is written with. */
struct candidate {
    uint8_t *z;
    size_t n; /* SIZE_MAX: none yet */
    unsigned format;
    const struct kiln_pack_dict *use;
};

/* The transformed streams of one module and the buffers that compete for
 * them. */
struct streams {
    ZSTD_CCtx *cctx;
    const uint8_t *x;
    size_t xn, cap; /* the streams' bytes; each candidate's room */
    struct candidate best, spare;
};

/* Compresses the streams with `o` into the spare buffer and keeps the
 * result as the best when it is smaller. @return 0 or KILN_ENOMEM, logged. */
static int consider(struct streams *st, const struct frame_opts *o, unsigned format)
{
    size_t n = zstd_frame(st->cctx, o, st->spare.z, st->cap, st->x, st->xn);
    if (ZSTD_isError(n)) {
        KILN_ERROR("pack", "zstd compression of %zu transformed bytes failed: %s", st->xn,
                   ZSTD_getErrorName(n));
        return KILN_ENOMEM;
    }
    if (n < st->best.n) {
        struct candidate won = {st->spare.z, n, format, o->dict};
        st->spare = st->best;
        st->best = won;
    }
    return 0;
}

/*
 * The kiln codec's candidates at one level: with the dictionary `use` (or
 * none), and, with `plain`, without any, written with format 3's kind.
 */
static int consider_level(struct streams *st, const struct pack_req *q, size_t nwords,
                          const struct kiln_pack_dict *use, bool builtin, bool plain)
{
    struct frame_opts o = kiln_frame_opts(q, nwords, use, builtin);
    KILN_TRY(consider(st, &o, q->format));
    if (!plain)
        return 0;
    /* Without a dictionary, at the level's rules; at the default level with
     * zstd -3, which costs less packing time than level 5. */
    struct frame_opts p = kiln_frame_opts(q, nwords, NULL, false);
    if (q->level == KILN_PACK_LEVEL_DEFAULT)
        p.level = KILN__PLAIN_LEVEL;
    return consider(st, &p, 3);
}

/*
 * The kiln codec: transform into the front of xbuf, compress into its back,
 * with the caller's dictionary or, from format 4, the built-in one. From
 * format 4 a dictionary never makes a module larger: the built-in one's
 * streams (and at the shipping level the caller's) are compressed without
 * it too, and the smaller is kept; a blob without a dictionary is then
 * written with format 3's kind, which says so to every reader since format
 * 3 (pack-format.md, "A dictionary never makes a module larger"). The
 * shipping level also tries the default level's candidates with its own
 * literal rule (raw), so that it is never larger than those; Huffman-coded
 * ones would unpack slower. `q->plain` (tests) packs without any.
 * @return 0, KILN_EFORMAT when the module does not parse (the caller falls
 * back), or an error.
 */
static int pack_kiln(struct kiln__pack_tls *tls, const struct pack_req *q, const uint32_t *words,
                     size_t nwords, uint64_t checksum, void **blob, size_t *blob_size)
{
    unsigned format = q->format;
    size_t work = format == 1 ? kiln__spirv1_work_bound(nwords) : kiln__spirv2_work_bound(nwords);
    size_t xbound =
        format == 1 ? kiln__spirv1_xform_bound(nwords) : kiln__spirv2_xform_bound(nwords);
    size_t zbound = ZSTD_compressBound(xbound);
    KILN_TRY(kiln__pack_tls_xbuf(tls, work + 2 * zbound));
    int64_t xn = format == 1 ? kiln__spirv1_encode(words, nwords, tls->xbuf, work, -1)
                             : kiln__spirv2_encode(words, nwords, tls->xbuf, work, -1);
    if (xn < 0)
        return (int)xn;
    bool builtin = !q->plain && packs_with_builtin(format, q->dict != NULL, (uint32_t)(nwords * 4));
    const struct kiln_pack_dict *use = builtin ? kiln__pack_builtin() : q->plain ? NULL : q->dict;
    if (builtin && !use)
        return KILN_ENOMEM;
    struct streams st = {.cctx = tls->cctx,
                         .x = tls->xbuf,
                         .xn = (size_t)xn,
                         .cap = zbound,
                         .best = {tls->xbuf + work + zbound, SIZE_MAX, format, NULL},
                         .spare = {tls->xbuf + work, 0, format, NULL}};
    bool plain = format >= 4 && (builtin || (use && q->level == KILN_PACK_LEVEL_MAX));
    KILN_TRY(consider_level(&st, q, nwords, use, builtin, plain));
    if (q->level == KILN_PACK_LEVEL_MAX) {
        struct pack_req d = *q;
        d.level = KILN_PACK_LEVEL_DEFAULT;
        d.raw = true;
        KILN_TRY(consider_level(&st, &d, nwords, use, builtin, plain));
    }
    struct candidate *b = &st.best;
    if (q->plain)
        b->format = 3;
    unsigned block = 0;
    size_t skip = b->format >= 2 ? strip_frame(b->z, b->n, &block) : 0;
    uint8_t head[BLOB_HEAD_DICT];
    const struct kiln_pack_dict *named = b->use && b->use == q->dict ? q->dict : NULL;
    size_t hs = write_head(head, b->format, KILN_CODEC_KILN, named, (uint32_t)(nwords * 4),
                           checksum, block);
    return finish_blob(b->format, nwords, b->use ? b->use->id : 0, head, hs, b->z + skip,
                       b->n - skip, blob, blob_size);
}

static int pack_format(const struct pack_req *q, const uint32_t *words, size_t nwords, void **blob,
                       size_t *blob_size)
{
    if (!blob || !blob_size || (nwords && !words) || (unsigned)q->codec > KILN_CODEC_KILN)
        return KILN_EINVAL;
    *blob = NULL;
    *blob_size = 0;
    if (nwords > KILN_PACK_MAX_SPIRV_BYTES / 4) {
        KILN_ERROR("pack", "module of %zu words is over the %u MiB a blob may hold", nwords,
                   KILN_PACK_MAX_SPIRV_BYTES >> 20);
        return KILN_ERANGE;
    }
    /* Formats 3 and 4 seal the blob once it is made instead. */
    uint64_t checksum = q->format < 3 ? kiln_hash64(words, nwords * 4) : 0;
    if (q->codec == KILN_CODEC_RAW || !is_spirv(words, nwords))
        return pack_raw(q->format, words, nwords, checksum, blob, blob_size);
    struct kiln__pack_tls *tls = kiln__pack_tls();
    if (!tls)
        return KILN_ENOMEM;
    if (q->codec == KILN_CODEC_KILN) {
        int rc = pack_kiln(tls, q, words, nwords, checksum, blob, blob_size);
        if (rc != KILN_EFORMAT)
            return rc;
        /* A module whose instructions do not parse still packs, with zstd. */
        KILN_DEBUG("pack", "module of %zu words does not parse as SPIR-V; packed with zstd",
                   nwords);
    }
    return pack_zstd(tls, q, words, nwords, checksum, blob, blob_size);
}

int kiln_pack(const uint32_t *words, size_t nwords, enum kiln_codec codec,
              const struct kiln_pack_dict *dict, void **blob, size_t *blob_size)
{
    struct pack_req q = {.format = 4, .codec = codec, .dict = dict};
    return pack_format(&q, words, nwords, blob, blob_size);
}

int kiln_pack_with(const uint32_t *words, size_t nwords, const struct kiln_pack_options *o,
                   void **blob, size_t *blob_size)
{
    struct kiln_pack_options opt;
    if (!o)
        return KILN_EINVAL;
    KILN_TRY(KILN_STRUCT_IN(&opt, o, "kiln_pack_options"));
    if (opt.level != KILN_PACK_LEVEL_MAX && (opt.level < 0 || opt.level > ZSTD_maxCLevel())) {
        KILN_ERROR("pack",
                   "kiln_pack_options: level %d is none of 0 (the default), 1 to %d "
                   "and KILN_PACK_LEVEL_MAX",
                   (int)opt.level, ZSTD_maxCLevel());
        return KILN_EINVAL;
    }
    struct pack_req q = {
        .format = 4, .codec = (enum kiln_codec)opt.codec, .level = opt.level, .dict = opt.dict};
    return pack_format(&q, words, nwords, blob, blob_size);
}

/* kiln_pack making blob format `format` (1 to 3), for tests of old readers. */
static int pack_old(unsigned format, const uint32_t *words, size_t nwords, enum kiln_codec codec,
                    const struct kiln_pack_dict *dict, void **blob, size_t *blob_size)
{
    struct pack_req q = {.format = format, .codec = codec, .dict = dict};
    return pack_format(&q, words, nwords, blob, blob_size);
}

int kiln__pack_plain(const uint32_t *words, size_t nwords, int level, void **blob,
                     size_t *blob_size)
{
    struct pack_req q = {.format = 4, .codec = KILN_CODEC_KILN, .level = level, .plain = true};
    return pack_format(&q, words, nwords, blob, blob_size);
}

int kiln__pack_format3(const uint32_t *words, size_t nwords, enum kiln_codec codec,
                       const struct kiln_pack_dict *dict, void **blob, size_t *blob_size)
{
    return pack_old(3, words, nwords, codec, dict, blob, blob_size);
}

int kiln__pack_format2(const uint32_t *words, size_t nwords, enum kiln_codec codec,
                       const struct kiln_pack_dict *dict, void **blob, size_t *blob_size)
{
    return pack_old(2, words, nwords, codec, dict, blob, blob_size);
}

int kiln__pack_format1(const uint32_t *words, size_t nwords, enum kiln_codec codec,
                       const struct kiln_pack_dict *dict, void **blob, size_t *blob_size)
{
    return pack_old(1, words, nwords, codec, dict, blob, blob_size);
}

int kiln__blob_format(const void *blob, size_t blob_size)
{
    struct blob_head h;
    KILN_TRY(read_head(blob, blob_size, &h));
    return (int)h.format;
}

int64_t kiln__blob_seal(const void *blob, size_t blob_size, uint64_t dict_id)
{
    struct blob_head h;
    KILN_TRY(read_head(blob, blob_size, &h));
    if (h.format < 3)
        return KILN_EINVAL;
    if (h.builtin)
        dict_id = KILN__BUILTIN_DICT_ID;
    return blob_seal(h.kind, h.spirv_bytes / 4, h.dict || h.builtin ? dict_id : 0,
                     (const uint8_t *)blob + h.head_size, blob_size - h.head_size);
}

int kiln__blob_reseal(void *blob, size_t blob_size, uint64_t dict_id)
{
    struct blob_head h;
    int64_t seal = kiln__blob_seal(blob, blob_size, dict_id);
    if (seal < 0)
        return (int)seal;
    KILN_TRY(read_head(blob, blob_size, &h));
    kiln__store_le32((uint8_t *)blob + h.head_size - 4 - (h.dict ? 2 : 0), (uint32_t)seal);
    return 0;
}

void kiln_pack_free(void *blob)
{
    kiln__free(blob);
}

/* ---- unpacking ---------------------------------------------------------- */

static int64_t corrupt(size_t blob_size, const char *why)
{
    KILN_WARN("pack", "damaged blob of %zu bytes: %s", blob_size, why);
    return KILN_ECORRUPT_BLOB;
}

/*
 * The thread's decompression context for blobs packed with `ddict`. zstd
 * treats a dictionary as cold when the context last used another one: it
 * prefetches the dictionary's whole content and decodes with its slower
 * long-offset loop. A context per dictionary keeps a thread that unpacks
 * for two caches (or two dictionaries in turn) on the fast path.
 * @return NULL when out of memory.
 */
static ZSTD_DCtx *dict_dctx(struct kiln__pack_tls *tls, const ZSTD_DDict *ddict)
{
    for (unsigned i = 0; i < KILN__DICT_DCTX; i++) {
        if (tls->ddctx_key[i] == ddict && tls->ddctx[i]) {
            tls->ddctx_last = i;
            return tls->ddctx[i];
        }
    }
    unsigned i = (tls->ddctx_last + 1) % KILN__DICT_DCTX;
    if (!tls->ddctx[i] && !(tls->ddctx[i] = ZSTD_createDCtx_advanced(kiln__zstd_mem())))
        return NULL;
    tls->ddctx_key[i] = ddict;
    tls->ddctx_last = i;
    return tls->ddctx[i];
}

/* Points the thread's decompression context at one format of frame. */
static bool dctx_format(ZSTD_DCtx *d, unsigned format)
{
    return !ZSTD_isError(ZSTD_DCtx_setParameter(
        d, ZSTD_d_format, format == 1 ? ZSTD_f_zstd1 : ZSTD_f_zstd1_magicless));
}

/* Every unpack, for kiln_unpack_count (relaxed: a figure, never a gate). */
static _Atomic uint64_t unpacks;

uint64_t kiln_unpack_count(void)
{
    return atomic_load_explicit(&unpacks, memory_order_relaxed);
}

int64_t kiln_unpack(const void *blob, size_t blob_size, const struct kiln_pack_dict *dict,
                    uint32_t *out, size_t out_words)
{
    if (!blob)
        return KILN_EINVAL;
    atomic_fetch_add_explicit(&unpacks, 1, memory_order_relaxed);
    struct blob_head h;
    if (read_head(blob, blob_size, &h) < 0)
        return corrupt(blob_size, "bad header");
    size_t nwords = h.spirv_bytes / 4;
    if (out_words < nwords)
        return KILN_ERANGE;
    if (nwords && !out)
        return KILN_EINVAL;
    /* The dictionary the blob was packed with: the caller's, the built-in
     * one (format 4), or none. */
    const struct kiln_pack_dict *use = NULL;
    if (h.dict) {
        uint64_t want = h.format == 1 ? dict ? dict->id : 0 : dict ? (uint16_t)dict->id : 0;
        if (!dict || want != h.dict_id) {
            KILN_WARN("pack", "blob needs dictionary %0*" PRIx64 ", %s given",
                      h.format == 1 ? 16 : 4, h.dict_id, dict ? "another was" : "none was");
            return KILN_EINVAL;
        }
        use = dict;
    } else if (h.builtin && !(use = kiln__pack_builtin())) {
        return KILN_ENOMEM;
    }
    const uint8_t *payload = (const uint8_t *)blob + h.head_size;
    size_t psize = blob_size - h.head_size;
    /* Formats 3 and 4 check the packed bytes before they decode them (and
     * the output not at all): the seal covers every byte of the blob and
     * the whole dictionary id. */
    if (h.format >= 3 &&
        blob_seal(h.kind, (uint32_t)nwords, use ? use->id : 0, payload, psize) != h.checksum)
        return corrupt(blob_size, "checksum mismatch");

    if (h.codec == KILN_CODEC_RAW) {
        if (nwords)
            memcpy(out, payload, h.spirv_bytes);
    } else {
        struct kiln__pack_tls *tls = kiln__pack_tls();
        if (!tls)
            return KILN_ENOMEM;
        if (!use && !tls->dctx)
            tls->dctx = ZSTD_createDCtx_advanced(kiln__zstd_mem());
        ZSTD_DCtx *dctx = use ? dict_dctx(tls, use->ddict) : tls->dctx;
        if (!dctx || !dctx_format(dctx, h.format))
            return KILN_ENOMEM;
        size_t xbound = h.codec == KILN_CODEC_ZSTD ? 0
                        : h.format == 1            ? kiln__spirv1_xform_bound(nwords)
                                                   : kiln__spirv2_xform_bound(nwords);
        size_t scratch =
            h.codec == KILN_CODEC_KILN && h.format >= 2 ? kiln__spirv2_decode_scratch(nwords) : 0;
        size_t need = xbound + scratch + (h.block ? psize + 5 : 0);
        if (need && kiln__pack_tls_xbuf(tls, need) < 0)
            return KILN_ENOMEM;
        if (h.block) {
            uint8_t *frame = tls->xbuf + xbound + scratch;
            if (!rebuild_frame(frame, payload, psize, h.block))
                return corrupt(blob_size, "payload too long for one block");
            payload = frame;
            psize += 5;
        }
        if (h.codec == KILN_CODEC_ZSTD) {
            size_t n = ZSTD_decompressDCtx(dctx, out, h.spirv_bytes, payload, psize);
            if (ZSTD_isError(n) || n != h.spirv_bytes)
                return corrupt(blob_size, "zstd frame does not decode to the stated size");
        } else {
            /* A frame that makes more than the transform can make for this
             * many words fails here. */
            size_t n = use ? ZSTD_decompress_usingDDict(dctx, tls->xbuf, xbound, payload, psize,
                                                        use->ddict)
                           : ZSTD_decompressDCtx(dctx, tls->xbuf, xbound, payload, psize);
            if (ZSTD_isError(n))
                return corrupt(blob_size, "zstd frame does not decode");
            int rc = h.format == 1
                         ? kiln__spirv1_decode(tls->xbuf, n, out, nwords)
                         : kiln__spirv2_decode(tls->xbuf, n, out, nwords, tls->xbuf + xbound);
            if (rc < 0)
                return corrupt(blob_size, "transformed streams are damaged");
        }
    }
    if (h.format < 3) {
        uint64_t sum = kiln_hash64(out, h.spirv_bytes);
        if ((h.format == 1 ? sum : (uint32_t)sum) != h.checksum)
            return corrupt(blob_size, "SPIR-V checksum mismatch");
    }
    return (int64_t)nwords;
}

int64_t kiln_unpack_scratch(const void *blob, size_t blob_size, const struct kiln_pack_dict *dict,
                            const uint32_t **words)
{
    if (!blob || !words)
        return KILN_EINVAL;
    if (!words)
        return KILN_EINVAL;
    *words = NULL;
    size_t bytes;
    if (kiln_blob_info(blob, blob_size, NULL, &bytes) < 0)
        return corrupt(blob_size, "bad header");
    struct kiln__pack_tls *tls = kiln__pack_tls();
    if (!tls)
        return KILN_ENOMEM;
    size_t nwords = bytes / 4;
    if (tls->scratch_cap < nwords || !tls->scratch) {
        size_t cap = KILN_MAX(nwords, (size_t)1024);
        uint32_t *p = kiln__realloc(tls->scratch, cap * 4);
        if (!p)
            return KILN_ENOMEM;
        tls->scratch = p;
        tls->scratch_cap = cap;
    }
    int64_t n = kiln_unpack(blob, blob_size, dict, tls->scratch, tls->scratch_cap);
    if (n >= 0)
        *words = tls->scratch;
    return n;
}

/* ---- names -------------------------------------------------------------- */

static const char *const codec_names[] = {"raw", "zstd", "kiln"};

const char *kiln_codec_name(enum kiln_codec codec)
{
    return (unsigned)codec < KILN_ARRAY_LEN(codec_names) ? codec_names[codec] : NULL;
}

int kiln_codec_parse(const char *name, enum kiln_codec *codec)
{
    for (size_t i = 0; name && i < KILN_ARRAY_LEN(codec_names); i++) {
        if (strcmp(name, codec_names[i]) == 0) {
            if (codec)
                *codec = (enum kiln_codec)i;
            return 0;
        }
    }
    return KILN_EINVAL;
}

/*
 * pack.c - packed SPIR-V blobs: the header, the codecs and the per-thread
 * contexts.
 *
 * Design. A blob is a fixed header and the codec's payload:
 *
 *   0  u8   'K'                 magic
 *   1  u8   version (1)
 *   2  u8   codec (enum kiln_codec)
 *   3  u8   flags: bit 0 = a dictionary was used; other bits are 0
 *   4  u32  SPIR-V size in bytes (a multiple of 4)
 *   8  u64  XXH3-64 (kiln_hash64) of the SPIR-V bytes
 *  16  u64  the dictionary's id, only when flag bit 0 is set
 *  16 or 24: payload (raw: the SPIR-V; zstd: one zstd frame of the SPIR-V;
 *            kiln: one zstd frame of the transformed streams)
 *
 * Invariants, and why they hold:
 * - A blob never unpacks to wrong SPIR-V without an error: the header
 *   carries the checksum of the SPIR-V it stands for, and every codec's
 *   output is checked against it (and against the size) before success is
 *   returned. Damage that the decoders do not notice is caught there.
 * - Decoding never reads or writes out of bounds: the header is read only
 *   after its length is checked, zstd is given exact capacities, and the
 *   transform's decoder checks every read (pack_spirv.c).
 * - Contexts are never made per call: each thread has one ZSTD_CCtx, one
 *   ZSTD_DCtx and its buffers, made on first use and freed by a pthread key
 *   destructor when the thread exits (or by kiln_pack_thread_cleanup).
 *
 * Blobs hold SPIR-V words in little-endian byte order; kiln builds on
 * little-endian hosts only, so a word array is its own byte form.
 */
#include "pack_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kiln's packed blobs assume a little-endian host"
#endif

#define BLOB_MAGIC     0x4Bu /* 'K' */
#define BLOB_VERSION   1u
#define BLOB_FLAG_DICT 0x01u
#define BLOB_HEAD      16u
#define BLOB_HEAD_DICT 24u

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
    free(tls->xbuf);
    free(tls->scratch);
    free(tls);
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
    tls = calloc(1, sizeof(*tls));
    if (!tls)
        return NULL;
    tls->cctx = ZSTD_createCCtx();
    tls->dctx = ZSTD_createDCtx();
    if (!tls->cctx || !tls->dctx || pthread_setspecific(tls_key, tls) != 0) {
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
    void *p = realloc(tls->xbuf, n);
    if (!p)
        return KILN_ENOMEM;
    tls->xbuf = p;
    tls->xcap = n;
    return 0;
}

/* ---- header ------------------------------------------------------------- */

struct blob_head {
    enum kiln_codec codec;
    bool dict;
    uint32_t spirv_bytes;
    uint64_t checksum;
    uint64_t dict_id;
    size_t head_size;
};

static size_t write_head(uint8_t *p, enum kiln_codec codec, const struct kiln_pack_dict *dict,
                         uint32_t spirv_bytes, uint64_t checksum)
{
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

static int read_head(const void *blob, size_t blob_size, struct blob_head *h)
{
    const uint8_t *p = blob;
    if (!blob || blob_size < BLOB_HEAD || p[0] != BLOB_MAGIC || p[1] != BLOB_VERSION ||
        p[2] > KILN_CODEC_KILN || (p[3] & ~BLOB_FLAG_DICT) != 0)
        return KILN_ECORRUPT_BLOB;
    h->codec = (enum kiln_codec)p[2];
    h->dict = (p[3] & BLOB_FLAG_DICT) != 0;
    h->spirv_bytes = kiln__load_le32(p + 4);
    h->checksum = kiln__load_le64(p + 8);
    h->dict_id = 0;
    h->head_size = BLOB_HEAD;
    if (h->spirv_bytes % 4 != 0 || h->spirv_bytes > KILN_PACK_MAX_SPIRV_BYTES)
        return KILN_ECORRUPT_BLOB;
    if (h->dict) {
        /* Only the kiln codec uses a dictionary. */
        if (h->codec != KILN_CODEC_KILN || blob_size < BLOB_HEAD_DICT)
            return KILN_ECORRUPT_BLOB;
        h->dict_id = kiln__load_le64(p + 16);
        h->head_size = BLOB_HEAD_DICT;
    }
    if (h->codec == KILN_CODEC_RAW && blob_size - h->head_size != h->spirv_bytes)
        return KILN_ECORRUPT_BLOB;
    return 0;
}

int kiln_blob_info(const void *blob, size_t blob_size, enum kiln_codec *codec, size_t *spirv_bytes)
{
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

static int pack_raw(const uint32_t *words, size_t nwords, uint64_t checksum, void **blob,
                    size_t *blob_size)
{
    size_t bytes = nwords * 4;
    uint8_t *b = malloc(BLOB_HEAD + bytes);
    if (!b)
        return KILN_ENOMEM;
    write_head(b, KILN_CODEC_RAW, NULL, (uint32_t)bytes, checksum);
    if (bytes)
        memcpy(b + BLOB_HEAD, words, bytes);
    *blob = b;
    *blob_size = BLOB_HEAD + bytes;
    return 0;
}

/* Allocates the blob at its exact size: it is kept for a long time. */
static int finish_blob(const uint8_t *head, size_t head_size, const void *payload,
                       size_t payload_size, void **blob, size_t *blob_size)
{
    uint8_t *b = malloc(head_size + payload_size);
    if (!b)
        return KILN_ENOMEM;
    memcpy(b, head, head_size);
    memcpy(b + head_size, payload, payload_size);
    *blob = b;
    *blob_size = head_size + payload_size;
    return 0;
}

static int pack_zstd(struct kiln__pack_tls *tls, const uint32_t *words, size_t nwords,
                     uint64_t checksum, void **blob, size_t *blob_size)
{
    size_t bytes = nwords * 4;
    size_t bound = ZSTD_compressBound(bytes);
    KILN_TRY(kiln__pack_tls_xbuf(tls, bound));
    size_t n = ZSTD_compressCCtx(tls->cctx, tls->xbuf, bound, words, bytes, 1);
    if (ZSTD_isError(n)) {
        KILN_ERROR("pack", "zstd compression of %zu bytes failed: %s", bytes, ZSTD_getErrorName(n));
        return KILN_ENOMEM;
    }
    uint8_t head[BLOB_HEAD_DICT];
    size_t hs = write_head(head, KILN_CODEC_ZSTD, NULL, (uint32_t)bytes, checksum);
    return finish_blob(head, hs, tls->xbuf, n, blob, blob_size);
}

/*
 * The kiln codec: transform into the front of xbuf, compress into its back.
 * @return 0, KILN_EFORMAT when the module does not parse (the caller falls
 * back), or an error.
 */
static int pack_kiln(struct kiln__pack_tls *tls, const uint32_t *words, size_t nwords,
                     const struct kiln_pack_dict *dict, uint64_t checksum, void **blob,
                     size_t *blob_size)
{
    size_t work = kiln__spirv_work_bound(nwords);
    size_t zbound = ZSTD_compressBound(kiln__spirv_xform_bound(nwords));
    KILN_TRY(kiln__pack_tls_xbuf(tls, work + zbound));
    int64_t xn = kiln__spirv_encode(words, nwords, tls->xbuf, work);
    if (xn < 0)
        return (int)xn;
    uint8_t *z = tls->xbuf + work;
    ZSTD_CCtx *c = tls->cctx;
    size_t rc = ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(rc))
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, KILN__KILN_LEVEL);
    /* The blob header names the dictionary and holds the checksum. */
    if (!ZSTD_isError(rc))
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_dictIDFlag, 0);
    if (!ZSTD_isError(rc))
        rc = ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0);
    if (!ZSTD_isError(rc) && dict)
        rc = ZSTD_CCtx_refCDict(c, dict->cdict);
    size_t n = ZSTD_isError(rc) ? rc : ZSTD_compress2(c, z, zbound, tls->xbuf, (size_t)xn);
    if (dict)
        ZSTD_CCtx_refCDict(c, NULL);
    if (ZSTD_isError(n)) {
        KILN_ERROR("pack", "zstd compression of %" PRId64 " transformed bytes failed: %s", xn,
                   ZSTD_getErrorName(n));
        return KILN_ENOMEM;
    }
    uint8_t head[BLOB_HEAD_DICT];
    size_t hs = write_head(head, KILN_CODEC_KILN, dict, (uint32_t)(nwords * 4), checksum);
    return finish_blob(head, hs, z, n, blob, blob_size);
}

int kiln_pack(const uint32_t *words, size_t nwords, enum kiln_codec codec,
              const struct kiln_pack_dict *dict, void **blob, size_t *blob_size)
{
    if (!blob || !blob_size || (nwords && !words) || (unsigned)codec > KILN_CODEC_KILN)
        return KILN_EINVAL;
    *blob = NULL;
    *blob_size = 0;
    if (nwords > KILN_PACK_MAX_SPIRV_BYTES / 4) {
        KILN_ERROR("pack", "module of %zu words is over the %u MiB a blob may hold", nwords,
                   KILN_PACK_MAX_SPIRV_BYTES >> 20);
        return KILN_ERANGE;
    }
    uint64_t checksum = kiln_hash64(words, nwords * 4);
    if (codec == KILN_CODEC_RAW || !is_spirv(words, nwords))
        return pack_raw(words, nwords, checksum, blob, blob_size);
    struct kiln__pack_tls *tls = kiln__pack_tls();
    if (!tls)
        return KILN_ENOMEM;
    if (codec == KILN_CODEC_KILN) {
        int rc = pack_kiln(tls, words, nwords, dict, checksum, blob, blob_size);
        if (rc != KILN_EFORMAT)
            return rc;
        /* A module whose instructions do not parse still packs, with zstd. */
        KILN_DEBUG("pack", "module of %zu words does not parse as SPIR-V; packed with zstd",
                   nwords);
    }
    return pack_zstd(tls, words, nwords, checksum, blob, blob_size);
}

void kiln_pack_free(void *blob)
{
    free(blob);
}

/* ---- unpacking ---------------------------------------------------------- */

static int64_t corrupt(size_t blob_size, const char *why)
{
    KILN_WARN("pack", "damaged blob of %zu bytes: %s", blob_size, why);
    return KILN_ECORRUPT_BLOB;
}

int64_t kiln_unpack(const void *blob, size_t blob_size, const struct kiln_pack_dict *dict,
                    uint32_t *out, size_t out_words)
{
    struct blob_head h;
    if (read_head(blob, blob_size, &h) < 0)
        return corrupt(blob_size, "bad header");
    size_t nwords = h.spirv_bytes / 4;
    if (out_words < nwords)
        return KILN_ERANGE;
    if (nwords && !out)
        return KILN_EINVAL;
    if (h.dict && (!dict || dict->id != h.dict_id)) {
        KILN_WARN("pack", "blob needs dictionary %016" PRIx64 ", %s given", h.dict_id,
                  dict ? "another was" : "none was");
        return KILN_EINVAL;
    }
    const uint8_t *payload = (const uint8_t *)blob + h.head_size;
    size_t psize = blob_size - h.head_size;

    if (h.codec == KILN_CODEC_RAW) {
        if (nwords)
            memcpy(out, payload, h.spirv_bytes);
    } else {
        struct kiln__pack_tls *tls = kiln__pack_tls();
        if (!tls)
            return KILN_ENOMEM;
        if (h.codec == KILN_CODEC_ZSTD) {
            size_t n = ZSTD_decompressDCtx(tls->dctx, out, h.spirv_bytes, payload, psize);
            if (ZSTD_isError(n) || n != h.spirv_bytes)
                return corrupt(blob_size, "zstd frame does not decode to the stated size");
        } else {
            unsigned long long xn = ZSTD_getFrameContentSize(payload, psize);
            size_t xbound = kiln__spirv_xform_bound(nwords);
            if (xn == ZSTD_CONTENTSIZE_ERROR || xn == ZSTD_CONTENTSIZE_UNKNOWN || xn > xbound)
                return corrupt(blob_size, "bad zstd frame header");
            if (kiln__pack_tls_xbuf(tls, xbound) < 0)
                return KILN_ENOMEM;
            size_t n = h.dict
                           ? ZSTD_decompress_usingDDict(tls->dctx, tls->xbuf, (size_t)xn, payload,
                                                        psize, dict->ddict)
                           : ZSTD_decompressDCtx(tls->dctx, tls->xbuf, (size_t)xn, payload, psize);
            if (ZSTD_isError(n) || n != xn)
                return corrupt(blob_size, "zstd frame does not decode to the stated size");
            if (kiln__spirv_decode(tls->xbuf, n, out, nwords) < 0)
                return corrupt(blob_size, "transformed streams are damaged");
        }
    }
    if (kiln_hash64(out, h.spirv_bytes) != h.checksum)
        return corrupt(blob_size, "SPIR-V checksum mismatch");
    return (int64_t)nwords;
}

int64_t kiln_unpack_scratch(const void *blob, size_t blob_size, const struct kiln_pack_dict *dict,
                            const uint32_t **words)
{
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
        uint32_t *p = realloc(tls->scratch, cap * 4);
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

/*
 * pack_dict.c - the kiln codec's zstd dictionary: training, loading and its
 * serialized form (programs.kpd).
 *
 * Design. A dictionary is trained (zstd's COVER trainer) on the same bytes
 * it later primes: transform 2's streams of sample modules, not their raw
 * SPIR-V. Its id is kiln_hash64 of the zstd dictionary bytes; every blob
 * packed with it stores the id (formats 2 to 4: its low 16 bits), and
 * unpacking checks it, so a blob is never decoded with another dictionary
 * without an error (one sharing the low bits fails the blob's checksum
 * instead; the seal of formats 3 and 4 covers the whole id). The serialized form
 * repeats the id so that a damaged file is refused on load:
 *
 *   0  "KPD" and version 1 (4 bytes)
 *   4  u32  size of the zstd dictionary
 *   8  u64  its id
 *  16  the zstd dictionary
 *
 * The digested forms (two ZSTD_CDicts, for small and large modules, and a
 * ZSTD_DDict, all referring to the bytes kept here) are made once, so a
 * pack or unpack never re-digests the dictionary. A dictionary is
 * immutable once made: any number of threads may use it.
 *
 * The built-in dictionary (blob format 4's, for the kiln codec's modules of
 * up to KILN__LARGE_BYTES when the caller gives no dictionary) is one more
 * such dictionary, without the large modules' CDict, made from the bytes in
 * pack_builtin_dict.inc on first use and kept until the process exits. Its
 * bytes may never change: blobs name it by their format alone. Its id is
 * pinned (KILN__BUILTIN_DICT_ID), and a build whose bytes do not match
 * refuses to use it. tools/gen/builtin_dict.c made the bytes and says how.
 */
#include "pack_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#define ZDICT_STATIC_LINKING_ONLY /* the COVER trainer */
#include <zdict.h>

#define KPD_HEAD        KILN__KPD_HEAD
#define KPD_DEFAULT_MAX ((size_t)64 * 1024)
/* zstd refuses to train on fewer samples than this. */
#define KPD_MIN_SAMPLES 8u
/* The least sample bytes aimed for (when 100 x the dictionary is less). */
#define KPD_MIN_BUDGET (8u << 20)

/* Makes a dictionary of the zstd dictionary `zdict`; `large` says whether
 * it packs modules over KILN__LARGE_BYTES too (the built-in one does not). */
static int dict_make(const void *zdict, size_t zsize, bool large, struct kiln_pack_dict **out)
{
    struct kiln_pack_dict *d = kiln__calloc(1, sizeof(*d));
    if (!d)
        return KILN_ENOMEM;
    d->size = KPD_HEAD + zsize;
    d->bytes = kiln__malloc(d->size);
    if (!d->bytes) {
        kiln__free(d);
        return KILN_ENOMEM;
    }
    uint8_t *b = d->bytes;
    memcpy(b, "KPD\x01", 4);
    kiln__store_le32(b + 4, (uint32_t)zsize);
    d->id = kiln_hash64(zdict, zsize);
    kiln__store_le64(b + 8, d->id);
    memcpy(b + KPD_HEAD, zdict, zsize);
    /* Small modules: lazy matching, which finds much more in the
     * dictionary than the faster strategies, with tables of 2^15 entries
     * (the search, not the tables, is what the small inputs need). */
    ZSTD_compressionParameters cp = ZSTD_getCParams(KILN__DICT_LEVEL, 4096, zsize);
    cp.hashLog = KILN__DICT_TABLE_LOG;
    cp.chainLog = KILN__DICT_TABLE_LOG;
    d->cdict = ZSTD_createCDict_advanced(b + KPD_HEAD, zsize, ZSTD_dlm_byRef, ZSTD_dct_auto, cp,
                                         kiln__zstd_mem());
    ZSTD_compressionParameters lp = ZSTD_getCParams(KILN__LARGE_LEVEL, 64 << 10, zsize);
    if (large)
        d->cdict_large = ZSTD_createCDict_advanced(b + KPD_HEAD, zsize, ZSTD_dlm_byRef,
                                                   ZSTD_dct_auto, lp, kiln__zstd_mem());
    d->ddict = ZSTD_createDDict_advanced(b + KPD_HEAD, zsize, ZSTD_dlm_byRef, ZSTD_dct_auto,
                                         kiln__zstd_mem());
    if (!d->cdict || (large && !d->cdict_large) || !d->ddict) {
        kiln_pack_dict_destroy(d);
        return KILN_ENOMEM;
    }
    *out = d;
    return 0;
}

int kiln_pack_dict_train(const uint32_t *const *modules, const size_t *module_words, size_t count,
                         size_t max_bytes, struct kiln_pack_dict **dict)
{
    if (!dict || (count && (!modules || !module_words)))
        return KILN_EINVAL;
    *dict = NULL;
    if (max_bytes == 0)
        max_bytes = KPD_DEFAULT_MAX;
    size_t usable = 0, total_words = 0;
    for (size_t i = 0; i < count; i++) {
        if (modules[i] && module_words[i] >= 5 && modules[i][0] == KILN__SPIRV_MAGIC) {
            total_words += module_words[i];
            usable++;
        }
    }
    if (usable < KPD_MIN_SAMPLES) {
        KILN_ERROR("pack", "dictionary training needs at least %u SPIR-V modules, got %zu",
                   KPD_MIN_SAMPLES, usable);
        return KILN_EINVAL;
    }
    /* zstd advises about 100 times the dictionary's size in samples; more
     * only slows training. Take every stride-th module so that the samples
     * stay near that budget yet spread over the whole set (transformed
     * streams are about a third of the SPIR-V bytes, a fifth at most). */
    size_t budget = KILN_MAX(100 * max_bytes, (size_t)KPD_MIN_BUDGET);
    size_t stride = KILN_MAX((size_t)1, total_words * 4 / 3 / budget);
    if (usable / stride < KPD_MIN_SAMPLES)
        stride = KILN_MAX((size_t)1, usable / KPD_MIN_SAMPLES);
    size_t cap = budget + budget / 2;
    uint8_t *samples = kiln__malloc(cap);
    size_t *sizes = kiln__malloc((usable / stride + 1) * sizeof(*sizes));
    uint8_t *zdict = kiln__malloc(max_bytes);
    /* The transform's work buffer, its own (training is rare), so that this
     * file needs nothing of pack.c, which needs the built-in dictionary. */
    uint8_t *work_buf = NULL;
    size_t work_cap = 0;
    int rc = samples && sizes && zdict ? 0 : KILN_ENOMEM;
    size_t used = 0, nsamples = 0, seen = 0;
    for (size_t i = 0; rc == 0 && i < count && nsamples <= usable / stride; i++) {
        if (!modules[i] || module_words[i] < 5 || modules[i][0] != KILN__SPIRV_MAGIC)
            continue;
        if (seen++ % stride != 0)
            continue;
        size_t work = kiln__spirv2_work_bound(module_words[i]);
        if (work > work_cap) {
            uint8_t *p = kiln__realloc(work_buf, work);
            if (!p) {
                rc = KILN_ENOMEM;
                break;
            }
            work_buf = p;
            work_cap = work;
        }
        int64_t n = kiln__spirv2_encode(modules[i], module_words[i], work_buf, work, -1);
        if (n < 0)
            continue; /* a module that does not parse is packed with zstd: no sample */
        if ((size_t)n > cap - used) {
            if (nsamples >= KPD_MIN_SAMPLES)
                break;
            continue; /* a module larger than the budget left */
        }
        memcpy(samples + used, work_buf, (size_t)n);
        sizes[nsamples++] = (size_t)n;
        used += (size_t)n;
    }
    if (rc == 0 && nsamples < KPD_MIN_SAMPLES) {
        KILN_ERROR("pack", "dictionary training: only %zu of %zu modules parse as SPIR-V", nsamples,
                   count);
        rc = KILN_EINVAL;
    }
    if (rc == 0) {
        /* COVER with a search over its segment size: slower to train than
         * the default (fastCover) but its dictionaries pack several percent
         * smaller; training is rare (kiln cache repack --dict). */
        ZDICT_cover_params_t p;
        memset(&p, 0, sizeof(p));
        p.d = 8;
        p.steps = 4;
        p.nbThreads = 1;
        p.zParams.compressionLevel = KILN__DICT_LEVEL;
        /* zstd gives its trainer no allocator: its scratch memory is
         * libc's, the one allocation of kiln outside kiln's allocator
         * (freed before it returns; docs/api.md, "Memory"). */
        size_t zn = ZDICT_optimizeTrainFromBuffer_cover(zdict, max_bytes, samples, sizes,
                                                        (unsigned)nsamples, &p);
        if (ZDICT_isError(zn)) {
            KILN_ERROR("pack", "dictionary training on %zu samples (%zu bytes) failed: %s",
                       nsamples, used, ZDICT_getErrorName(zn));
            rc = KILN_EINVAL;
        } else {
            rc = dict_make(zdict, zn, true, dict);
            KILN_INFO("pack", "trained a %zu-byte dictionary on %zu modules (%zu bytes)", zn,
                      nsamples, used);
        }
    }
    kiln__free(work_buf);
    kiln__free(samples);
    kiln__free(sizes);
    kiln__free(zdict);
    return rc;
}

int kiln_pack_dict_load(const void *data, size_t size, struct kiln_pack_dict **dict)
{
    if (!dict)
        return KILN_EINVAL;
    *dict = NULL;
    if (!data)
        return KILN_EINVAL;
    const uint8_t *b = data;
    if (!data || size < KPD_HEAD || memcmp(b, "KPD\x01", 4) != 0 ||
        kiln__load_le32(b + 4) != size - KPD_HEAD) {
        KILN_WARN("pack", "dictionary of %zu bytes: not a kiln dictionary", size);
        return KILN_ECORRUPT;
    }
    if (kiln_hash64(b + KPD_HEAD, size - KPD_HEAD) != kiln__load_le64(b + 8)) {
        KILN_WARN("pack", "dictionary of %zu bytes: id does not match its content", size);
        return KILN_ECORRUPT;
    }
    return dict_make(b + KPD_HEAD, size - KPD_HEAD, true, dict);
}

const void *kiln_pack_dict_bytes(const struct kiln_pack_dict *dict, size_t *size)
{
    if (size)
        *size = dict ? dict->size : 0;
    return dict ? dict->bytes : NULL;
}

uint64_t kiln_pack_dict_id(const struct kiln_pack_dict *dict)
{
    return dict ? dict->id : 0;
}

void kiln_pack_dict_destroy(struct kiln_pack_dict *dict)
{
    if (!dict)
        return;
    ZSTD_freeCDict(dict->cdict);
    ZSTD_freeCDict(dict->cdict_large);
    ZSTD_freeDDict(dict->ddict);
    kiln__free(dict->bytes);
    kiln__free(dict);
}

/* ---- the built-in dictionary ------------------------------------------- */

static const uint8_t builtin_bytes[] = {
#include "pack_builtin_dict.inc"
};

static pthread_mutex_t builtin_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct kiln_pack_dict *) builtin;

const struct kiln_pack_dict *kiln__pack_builtin(void)
{
#ifdef KILN_PACK_BROKEN_BUILTIN
    /* The negative control of pack_threads.builtin_first_use (a build of
     * the tests only): made without the lock, the pointer read and written
     * plainly by every thread that comes first. */
    static struct kiln_pack_dict *racy;
    if (!racy && dict_make(builtin_bytes, sizeof(builtin_bytes), false, &racy) < 0)
        racy = NULL;
    return racy;
#endif
    struct kiln_pack_dict *d = atomic_load_explicit(&builtin, memory_order_acquire);
    if (KILN_LIKELY(d != NULL))
        return d;
    /* A lock rather than a once: a first call that runs out of memory
     * leaves the next one free to try again. */
    pthread_mutex_lock(&builtin_lock);
    d = atomic_load_explicit(&builtin, memory_order_relaxed);
    if (!d) {
        if (kiln_hash64(builtin_bytes, sizeof(builtin_bytes)) != KILN__BUILTIN_DICT_ID)
            KILN_ERROR("pack", "the built-in dictionary's bytes are not the pinned ones");
        else if (dict_make(builtin_bytes, sizeof(builtin_bytes), false, &d) == 0)
            atomic_store_explicit(&builtin, d, memory_order_release);
    }
    pthread_mutex_unlock(&builtin_lock);
    return d;
}

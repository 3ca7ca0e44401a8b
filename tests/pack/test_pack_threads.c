/*
 * test_pack_threads.c - 8 threads packing and unpacking at once give the
 * same bytes as one thread: the per-thread contexts and scratch buffers
 * share nothing, a dictionary is safe to share, and the built-in one is
 * made once however many threads use it first.
 */
#include "pack_corpus.h"

#include <pthread.h>

#define NTHREADS  8
#define NVARIANTS 4

static struct pc_corpus corpus;
static struct kiln_pack_dict *dict;
/* The single-thread reference blobs, [module][variant]. */
static void **ref_blob;
static size_t *ref_size;

static const enum kiln_codec codecs[NVARIANTS] = {KILN_CODEC_RAW, KILN_CODEC_ZSTD, KILN_CODEC_KILN,
                                                  KILN_CODEC_KILN};

static int pack_one(size_t i, int v, void **blob, size_t *size)
{
    return kiln_pack(corpus.m[i].words, corpus.m[i].nwords, codecs[v], v == 3 ? dict : NULL, blob,
                     size);
}

struct worker {
    unsigned id;
    size_t mismatches;
    int error;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    /* Each thread walks the modules from its own starting point, so that
     * different threads pack different modules at the same moment. */
    for (size_t k = 0; k < corpus.n; k++) {
        size_t i = (k + w->id * corpus.n / NTHREADS) % corpus.n;
        for (int v = 0; v < NVARIANTS; v++) {
            void *blob;
            size_t size;
            int rc = pack_one(i, v, &blob, &size);
            if (rc < 0) {
                w->error = rc;
                return NULL;
            }
            size_t r = i * NVARIANTS + (size_t)v;
            if (size != ref_size[r] || memcmp(blob, ref_blob[r], size) != 0)
                w->mismatches++;
            const uint32_t *words;
            int64_t n = kiln_unpack_scratch(blob, size, v == 3 ? dict : NULL, &words);
            if (n != (int64_t)corpus.m[i].nwords ||
                memcmp(words, corpus.m[i].words, corpus.m[i].nwords * 4) != 0)
                w->mismatches++;
            kiln_pack_free(blob);
        }
    }
    return NULL;
}

KT_CASE(eight_threads_same_bytes)
{
    KT_REQUIRE_OK(pc_load(&corpus));
    /* A quarter of the corpus keeps the case short under TSan. */
    if (corpus.n > 400) {
        for (size_t i = 400; i < corpus.n; i++) {
            free(corpus.m[i].path);
            free(corpus.m[i].words);
        }
        corpus.n = 400;
    }
    const uint32_t *mods[200];
    size_t words[200];
    for (size_t i = 0; i < 200; i++) {
        mods[i] = corpus.m[2 * i].words;
        words[i] = corpus.m[2 * i].nwords;
    }
    KT_REQUIRE_OK(kiln_pack_dict_train(mods, words, 200, 16 * 1024, &dict));
    ref_blob = calloc(corpus.n * NVARIANTS, sizeof(*ref_blob));
    ref_size = calloc(corpus.n * NVARIANTS, sizeof(*ref_size));
    KT_REQUIRE(ref_blob && ref_size);
    for (size_t i = 0; i < corpus.n; i++)
        for (int v = 0; v < NVARIANTS; v++)
            KT_REQUIRE_OK(
                pack_one(i, v, &ref_blob[i * NVARIANTS + v], &ref_size[i * NVARIANTS + v]));

    pthread_t t[NTHREADS];
    struct worker w[NTHREADS];
    for (unsigned i = 0; i < NTHREADS; i++) {
        w[i] = (struct worker){.id = i};
        KT_REQUIRE(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    for (unsigned i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        KT_CHECK_OK(w[i].error);
        KT_CHECK_EQ(w[i].mismatches, 0);
    }

    for (size_t i = 0; i < corpus.n * NVARIANTS; i++)
        kiln_pack_free(ref_blob[i]);
    free(ref_blob);
    free(ref_size);
    kiln_pack_dict_destroy(dict);
    pc_free(&corpus);
    kiln_pack_thread_cleanup();
}

/* ---- the built-in dictionary's first use ---------------------------------- */

#define FIRST_USE_ROUNDS 16

struct first_use {
    pthread_barrier_t *start;
    void *blob[FIRST_USE_ROUNDS];
    size_t size[FIRST_USE_ROUNDS];
    int error;
};

static void *first_use(void *arg)
{
    struct first_use *f = arg;
    pthread_barrier_wait(f->start);
    for (int r = 0; r < FIRST_USE_ROUNDS && !f->error; r++) {
        int rc = kiln_pack(pc_tiny_module, PC_TINY_WORDS, KILN_CODEC_KILN, NULL, &f->blob[r],
                           &f->size[r]);
        uint32_t out[PC_TINY_WORDS];
        if (rc == 0 &&
            (kiln_unpack(f->blob[r], f->size[r], NULL, out, PC_TINY_WORDS) != PC_TINY_WORDS ||
             memcmp(out, pc_tiny_module, sizeof(out)) != 0))
            rc = KILN_ECORRUPT_BLOB;
        f->error = rc;
    }
    return NULL;
}

KT_CASE(builtin_first_use)
{
    /* The built-in dictionary is made on first use: eight threads that pack
     * and unpack without a dictionary at once, in a process that has not
     * used it yet, all get the same bytes, and (under ThreadSanitizer) no
     * race. The library built with KILN_PACK_BROKEN_BUILTIN makes it without
     * the lock: pack_broken_builtin.builtin_first_use must fail under TSan. */
    pthread_barrier_t start;
    KT_REQUIRE(pthread_barrier_init(&start, NULL, NTHREADS) == 0);
    pthread_t t[NTHREADS];
    static struct first_use f[NTHREADS];
    for (unsigned i = 0; i < NTHREADS; i++) {
        f[i].start = &start;
        KT_REQUIRE(pthread_create(&t[i], NULL, first_use, &f[i]) == 0);
    }
    for (unsigned i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (unsigned i = 0; i < NTHREADS; i++) {
        KT_CHECK_OK(f[i].error);
        for (int r = 0; r < FIRST_USE_ROUNDS && f[i].blob[r]; r++) {
            KT_CHECK_EQ(f[i].size[r], f[0].size[0]);
            KT_CHECK(memcmp(f[i].blob[r], f[0].blob[0], f[0].size[0]) == 0);
        }
    }
    for (unsigned i = 0; i < NTHREADS; i++)
        for (int r = 0; r < FIRST_USE_ROUNDS; r++)
            kiln_pack_free(f[i].blob[r]);
    pthread_barrier_destroy(&start);
    kiln_pack_thread_cleanup();
}

KT_MAIN(KT_ENTRY(eight_threads_same_bytes), KT_ENTRY(builtin_first_use))

/*
 * test_pack_threads.c - 8 threads packing and unpacking at once give the
 * same bytes as one thread: the per-thread contexts and scratch buffers
 * share nothing, and a dictionary is safe to share.
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

KT_MAIN(KT_ENTRY(eight_threads_same_bytes))

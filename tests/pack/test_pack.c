/*
 * test_pack.c - packed blobs: headers, every codec's round trip over the
 * whole corpus, damage (truncation, bit flips, checksum), dictionaries and
 * the program payload.
 */
#include "pack_corpus.h"
#include "../support/gen_modules.h"

#include "kiln_internal.h"

/* The codec variants every test walks: the three codecs, and kiln with a dictionary. */
enum { V_RAW, V_ZSTD, V_KILN, V_KILN_DICT, V_COUNT };
static const enum kiln_codec variant_codec[V_COUNT] = {KILN_CODEC_RAW, KILN_CODEC_ZSTD,
                                                       KILN_CODEC_KILN, KILN_CODEC_KILN};

/* Trains a dictionary on the even-indexed corpus modules. */
static int train_even(const struct pc_corpus *c, struct kiln_pack_dict **dict)
{
    size_t n = (c->n + 1) / 2;
    const uint32_t **mods = malloc(n * sizeof(*mods));
    size_t *words = malloc(n * sizeof(*words));
    if (!mods || !words) {
        free(mods);
        free(words);
        return KILN_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        mods[i] = c->m[2 * i].words;
        words[i] = c->m[2 * i].nwords;
    }
    int rc = kiln_pack_dict_train(mods, words, n, 0, dict);
    free(mods);
    free(words);
    return rc;
}

KT_CASE(header_and_info)
{
    for (int v = 0; v < V_KILN_DICT; v++) {
        void *blob;
        size_t n, bytes;
        enum kiln_codec codec;
        KT_REQUIRE_OK(kiln_pack(pc_tiny_module, PC_TINY_WORDS, variant_codec[v], NULL, &blob, &n));
        KT_CHECK_OK(kiln_blob_info(blob, n, &codec, &bytes));
        KT_CHECK_EQ(codec, variant_codec[v]);
        KT_CHECK_EQ(bytes, sizeof(pc_tiny_module));
        KT_CHECK_OK(kiln_blob_info(blob, n, NULL, NULL));
        /* Format 4: the kind byte, the word count (one byte here) and the
         * 32-bit seal. */
        for (size_t cut = 0; cut < 6 && cut < n; cut++)
            KT_CHECK_EQ(kiln_blob_info(blob, cut, NULL, NULL), KILN_ECORRUPT_BLOB);
        ((uint8_t *)blob)[0] ^= 0x80; /* the kind's tag: 0xE0 (format 4) to 0x60, no format */
        KT_CHECK_EQ(kiln_blob_info(blob, n, NULL, NULL), KILN_ECORRUPT_BLOB);
        kiln_pack_free(blob);
    }
    /* A NULL blob is the caller's mistake, not a damaged blob (0.2). */
    KT_CHECK_EQ(kiln_blob_info(NULL, 100, NULL, NULL), KILN_EINVAL);
    void *blob;
    size_t n;
    KT_CHECK_EQ(kiln_pack(pc_tiny_module, PC_TINY_WORDS, (enum kiln_codec)7, NULL, &blob, &n),
                KILN_EINVAL);
    KT_CHECK_EQ(kiln_pack(NULL, 5, KILN_CODEC_RAW, NULL, &blob, &n), KILN_EINVAL);
    kiln_pack_free(NULL);
}

KT_CASE(codec_names)
{
    enum kiln_codec c;
    for (int i = 0; i < 3; i++) {
        KT_REQUIRE(kiln_codec_name((enum kiln_codec)i) != NULL);
        KT_CHECK_OK(kiln_codec_parse(kiln_codec_name((enum kiln_codec)i), &c));
        KT_CHECK_EQ(c, i);
    }
    KT_CHECK(strcmp(kiln_codec_name(KILN_CODEC_KILN), "kiln") == 0);
    KT_CHECK(kiln_codec_name((enum kiln_codec)3) == NULL);
    KT_CHECK_EQ(kiln_codec_parse("lz4", &c), KILN_EINVAL);
    KT_CHECK_EQ(kiln_codec_parse(NULL, &c), KILN_EINVAL);
}

/* Packs, checks the header, unpacks both ways and compares. */
static void round_trip(const uint32_t *words, size_t nwords, enum kiln_codec codec,
                       const struct kiln_pack_dict *dict, enum kiln_codec expect_codec,
                       const char *what)
{
    void *blob;
    size_t n, bytes;
    enum kiln_codec got;
    KT_REQUIRE_OK(kiln_pack(words, nwords, codec, dict, &blob, &n));
    KT_CHECK_OK(kiln_blob_info(blob, n, &got, &bytes));
    if (got != expect_codec)
        kt_fail(__FILE__, __LINE__, "%s: packed with %s, not %s", what, kiln_codec_name(got),
                kiln_codec_name(expect_codec));
    KT_CHECK_EQ(bytes, nwords * 4);
    uint32_t *out = malloc(nwords * 4 + 4);
    KT_REQUIRE(out != NULL);
    int64_t r = kiln_unpack(blob, n, dict, out, nwords + 1);
    if (r != (int64_t)nwords || (nwords && memcmp(out, words, nwords * 4) != 0))
        kt_fail(__FILE__, __LINE__, "%s: %s round trip: %" PRId64 " of %zu words", what,
                kiln_codec_name(codec), r, nwords);
    const uint32_t *sw;
    r = kiln_unpack_scratch(blob, n, dict, &sw);
    KT_CHECK(r == (int64_t)nwords && (nwords == 0 || memcmp(sw, words, nwords * 4) == 0));
    free(out);
    kiln_pack_free(blob);
}

KT_CASE(not_spirv_packs_raw)
{
    uint32_t wrong_magic[PC_TINY_WORDS];
    memcpy(wrong_magic, pc_tiny_module, sizeof(wrong_magic));
    wrong_magic[0] = 0x03022307u; /* byte-swapped */
    for (int c = 0; c < 3; c++) {
        round_trip(wrong_magic, PC_TINY_WORDS, (enum kiln_codec)c, NULL, KILN_CODEC_RAW, "magic");
        round_trip(pc_tiny_module, 4, (enum kiln_codec)c, NULL, KILN_CODEC_RAW, "short");
        round_trip(NULL, 0, (enum kiln_codec)c, NULL, KILN_CODEC_RAW, "empty");
    }
    /* SPIR-V magic, but an instruction that claims to run past the end:
     * the transform cannot take it, so the kiln codec falls back to zstd. */
    uint32_t broken[PC_TINY_WORDS];
    memcpy(broken, pc_tiny_module, sizeof(broken));
    broken[7] = (9u << 16) | 14u;
    round_trip(broken, PC_TINY_WORDS, KILN_CODEC_KILN, NULL, KILN_CODEC_ZSTD, "overlong");
    broken[7] = 14u; /* word count 0 */
    round_trip(broken, PC_TINY_WORDS, KILN_CODEC_KILN, NULL, KILN_CODEC_ZSTD, "zero count");
}

KT_CASE(odd_modules_round_trip)
{
    /* The transform must be lossless for any instruction stream, even one
     * whose operands do not match the opcode's usual shape: random words
     * under valid instruction heads, with random opcodes. */
    uint64_t rng = 42;
    for (int iter = 0; iter < 300; iter++) {
        uint32_t words[400];
        size_t n = 5;
        memcpy(words, pc_tiny_module, 5 * 4);
        size_t target = 6 + kt_rand(&rng) % 390;
        while (n < target) {
            uint32_t wc = 1 + (uint32_t)(kt_rand(&rng) % 12);
            if (wc > target - n)
                wc = (uint32_t)(target - n);
            uint32_t op;
            uint64_t pick = kt_rand(&rng) % 4;
            op = pick == 0 ? (uint32_t)(kt_rand(&rng) & 0xFFFF)
                           : (uint32_t)(kt_rand(&rng) % (pick == 1 ? 5700 : 420));
            words[n] = wc << 16 | op;
            for (uint32_t i = 1; i < wc; i++) {
                uint64_t r = kt_rand(&rng);
                words[n + i] = (r & 3) == 0 ? (uint32_t)(r >> 32) : (uint32_t)(r >> 40) % 300;
            }
            n += wc;
        }
        round_trip(words, n, KILN_CODEC_KILN, NULL, KILN_CODEC_KILN, "random");
    }
}

/* Whether the words are SPIR-V whose instruction lengths tile the module. */
static bool parses(const uint32_t *w, size_t n)
{
    if (n < 5 || w[0] != 0x07230203u)
        return false;
    size_t i = 5;
    while (i < n) {
        uint32_t wc = w[i] >> 16;
        if (wc == 0 || wc > n - i)
            return false;
        i += wc;
    }
    return true;
}

KT_CASE(corpus_round_trip)
{
    struct pc_corpus c;
    KT_REQUIRE_OK(pc_load(&c));
    struct kiln_pack_dict *dict = NULL;
    KT_REQUIRE_OK(train_even(&c, &dict));
    size_t broken = 0;
    for (size_t i = 0; i < c.n; i++) {
        const struct pc_module *m = &c.m[i];
        bool spirv = m->nwords >= 5 && m->words[0] == 0x07230203u;
        /* A module that does not parse (the corpus has a cut-off one)
         * takes the zstd codec when kiln's is asked for. */
        bool ok = parses(m->words, m->nwords);
        broken += !ok;
        for (int v = 0; v < V_COUNT; v++) {
            enum kiln_codec want = !spirv                                       ? KILN_CODEC_RAW
                                   : variant_codec[v] == KILN_CODEC_KILN && !ok ? KILN_CODEC_ZSTD
                                                                                : variant_codec[v];
            round_trip(m->words, m->nwords, variant_codec[v], v == V_KILN_DICT ? dict : NULL, want,
                       m->path);
        }
    }
    KT_CHECK(c.n > 1000);
    KT_CHECK(broken * 100 < c.n);
    kiln_pack_dict_destroy(dict);
    pc_free(&c);
}

/* Packs a spread of corpus modules with every variant. */
struct sample {
    const struct pc_module *m;
    void *blob[V_COUNT];
    size_t size[V_COUNT];
};

#define NSAMPLES 10

static int make_samples(const struct pc_corpus *c, const struct kiln_pack_dict *dict,
                        struct sample *s)
{
    for (size_t k = 0; k < NSAMPLES; k++) {
        s[k].m = &c->m[(k * 2 + 1) * c->n / (NSAMPLES * 2)];
        for (int v = 0; v < V_COUNT; v++)
            KILN_TRY(kiln_pack(s[k].m->words, s[k].m->nwords, variant_codec[v],
                               v == V_KILN_DICT ? dict : NULL, &s[k].blob[v], &s[k].size[v]));
    }
    return 0;
}

static void free_samples(struct sample *s)
{
    for (size_t k = 0; k < NSAMPLES; k++)
        for (int v = 0; v < V_COUNT; v++)
            kiln_pack_free(s[k].blob[v]);
}

/* @return whether unpacking gave an error or exactly the module. */
static bool error_or_exact(const void *blob, size_t n, const struct kiln_pack_dict *dict,
                           const struct pc_module *m, uint32_t *out, size_t out_words)
{
    int64_t r = kiln_unpack(blob, n, dict, out, out_words);
    if (r < 0)
        return r == KILN_ECORRUPT_BLOB || r == KILN_EINVAL || r == KILN_ERANGE;
    return (size_t)r == m->nwords && memcmp(out, m->words, m->nwords * 4) == 0;
}

KT_CASE(truncation_and_bit_flips)
{
    struct pc_corpus c;
    KT_REQUIRE_OK(pc_load(&c));
    struct kiln_pack_dict *dict = NULL;
    KT_REQUIRE_OK(train_even(&c, &dict));
    struct sample s[NSAMPLES];
    memset(s, 0, sizeof(s));
    KT_REQUIRE_OK(make_samples(&c, dict, s));
    kiln_log_set_level(KILN_LOG_ERROR); /* each damaged blob logs a warning */
    size_t out_words = 1u << 20;
    uint32_t *out = malloc(out_words * 4);
    KT_REQUIRE(out != NULL);

    /* Every truncation of every blob is an error. */
    size_t truncations = 0;
    for (size_t k = 0; k < NSAMPLES; k++) {
        for (int v = 0; v < V_COUNT; v++) {
            for (size_t cut = 0; cut < s[k].size[v]; cut++) {
                void *copy = malloc(cut ? cut : 1); /* exact size: ASan sees any overrun */
                memcpy(copy, s[k].blob[v], cut);
                int64_t r = kiln_unpack(copy, cut, dict, out, out_words);
                if (r != KILN_ECORRUPT_BLOB)
                    kt_fail(__FILE__, __LINE__, "%s cut at %zu of %zu (%s): %" PRId64, s[k].m->path,
                            cut, s[k].size[v], kiln_codec_name(variant_codec[v]), r);
                free(copy);
                truncations++;
            }
        }
    }
    KT_CHECK(truncations > 1000);

    /* 10,000 random bit flips: an error or the exact module, never else. */
    uint64_t rng = 7;
    size_t errors = 0;
    for (int i = 0; i < 10000; i++) {
        struct sample *sm = &s[kt_rand(&rng) % NSAMPLES];
        int v = (int)(kt_rand(&rng) % V_COUNT);
        size_t n = sm->size[v];
        uint8_t *copy = malloc(n);
        memcpy(copy, sm->blob[v], n);
        size_t bit = kt_rand(&rng) % (n * 8);
        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        int64_t r = kiln_unpack(copy, n, dict, out, out_words);
        if (r < 0) {
            errors++;
        } else if (!error_or_exact(copy, n, dict, sm->m, out, out_words)) {
            kt_fail(__FILE__, __LINE__, "%s (%s): bit %zu flipped gave wrong SPIR-V", sm->m->path,
                    kiln_codec_name(variant_codec[v]), bit);
        }
        free(copy);
    }
    /* Nearly every flip is caught (a flip in an unused bit may not matter). */
    KT_CHECK(errors > 9000);
    kiln_log_set_level(KILN_LOG_WARN);
    free(out);
    free_samples(s);
    kiln_pack_dict_destroy(dict);
    pc_free(&c);
}

KT_CASE(checksum_is_checked)
{
    /* The blob carries a checksum (format 3: a seal of the packed bytes),
     * checked before success: a changed stored checksum is refused, and so
     * is a flipped payload bit for every codec, even where the payload would
     * still decode (a raw blob has no other check). */
    kiln_log_set_level(KILN_LOG_ERROR);
    uint32_t out[PC_TINY_WORDS];
    for (int c = 0; c < 3; c++) {
        void *blob;
        size_t n;
        KT_REQUIRE_OK(
            kiln_pack(pc_tiny_module, PC_TINY_WORDS, (enum kiln_codec)c, NULL, &blob, &n));
        uint8_t *b = blob;
        /* The checksum's bytes follow the kind and the word count (one byte
         * for 10 words). */
        b[2] ^= 0x10;
        KT_CHECK_EQ(kiln_unpack(blob, n, NULL, out, PC_TINY_WORDS), KILN_ECORRUPT_BLOB);
        b[2] ^= 0x10;
        KT_CHECK_EQ(kiln_unpack(blob, n, NULL, out, PC_TINY_WORDS), (int64_t)PC_TINY_WORDS);
        for (size_t i = 6; i < n; i++) {
            b[i] ^= 0x01;
            KT_CHECK_EQ(kiln_unpack(blob, n, NULL, out, PC_TINY_WORDS), KILN_ECORRUPT_BLOB);
            b[i] ^= 0x01;
        }
        kiln_pack_free(blob);
    }
    kiln_log_set_level(KILN_LOG_WARN);
}

KT_CASE(unpack_arguments)
{
    void *blob;
    size_t n;
    KT_REQUIRE_OK(kiln_pack(pc_tiny_module, PC_TINY_WORDS, KILN_CODEC_KILN, NULL, &blob, &n));
    uint32_t out[PC_TINY_WORDS];
    KT_CHECK_EQ(kiln_unpack(blob, n, NULL, out, PC_TINY_WORDS - 1), KILN_ERANGE);
    KT_CHECK_EQ(kiln_unpack(blob, n, NULL, NULL, PC_TINY_WORDS), KILN_EINVAL);
    KT_CHECK_EQ(kiln_unpack_scratch(blob, n, NULL, NULL), KILN_EINVAL);
    const uint32_t *w = out;
    KT_CHECK_EQ(kiln_unpack_scratch(blob, 5, NULL, &w), KILN_ECORRUPT_BLOB);
    KT_CHECK(w == NULL);
    kiln_pack_free(blob);
    /* The scratch buffer lives until the next call; cleanup frees it and a
     * later call makes it again. */
    KT_REQUIRE_OK(kiln_pack(pc_tiny_module, PC_TINY_WORDS, KILN_CODEC_ZSTD, NULL, &blob, &n));
    KT_CHECK_EQ(kiln_unpack_scratch(blob, n, NULL, &w), (int64_t)PC_TINY_WORDS);
    kiln_pack_thread_cleanup();
    kiln_pack_thread_cleanup();
    KT_CHECK_EQ(kiln_unpack_scratch(blob, n, NULL, &w), (int64_t)PC_TINY_WORDS);
    KT_CHECK(memcmp(w, pc_tiny_module, sizeof(pc_tiny_module)) == 0);
    kiln_pack_free(blob);
    kiln_pack_thread_cleanup();
}

KT_CASE(dictionary)
{
    struct pc_corpus c;
    /* The shared corpus, or on a bare clone modules of kiln's generator. */
    KT_REQUIRE_OK(gm_load_any_or_skip(&c, 24));
    struct kiln_pack_dict *dict = NULL, *again = NULL;
    KT_REQUIRE_OK(train_even(&c, &dict));
    size_t size;
    const void *bytes = kiln_pack_dict_bytes(dict, &size);
    KT_REQUIRE(bytes != NULL && size > 1024 && size <= 64 * 1024 + 64);
    KT_REQUIRE_OK(kiln_pack_dict_load(bytes, size, &again));
    KT_CHECK(kiln_pack_dict_id(dict) != 0);
    KT_CHECK_EQ(kiln_pack_dict_id(dict), kiln_pack_dict_id(again));

    /* A blob packed with one copy unpacks with the other, and only with a
     * dictionary of that id. */
    const struct pc_module *m = &c.m[1];
    void *blob;
    size_t n;
    KT_REQUIRE_OK(kiln_pack(m->words, m->nwords, KILN_CODEC_KILN, dict, &blob, &n));
    uint32_t *out = malloc(m->nwords * 4);
    KT_REQUIRE(out != NULL);
    KT_CHECK_EQ(kiln_unpack(blob, n, again, out, m->nwords), (int64_t)m->nwords);
    KT_CHECK(memcmp(out, m->words, m->nwords * 4) == 0);
    kiln_log_set_level(KILN_LOG_ERROR);
    KT_CHECK_EQ(kiln_unpack(blob, n, NULL, out, m->nwords), KILN_EINVAL);
    struct kiln_pack_dict *other = NULL;
    const uint32_t *few[16];
    size_t few_words[16];
    for (int i = 0; i < 16; i++) {
        few[i] = c.m[2 * i + 1].words;
        few_words[i] = c.m[2 * i + 1].nwords;
    }
    KT_REQUIRE_OK(kiln_pack_dict_train(few, few_words, 16, 4096, &other));
    KT_CHECK(kiln_pack_dict_id(other) != kiln_pack_dict_id(dict));
    KT_CHECK_EQ(kiln_unpack(blob, n, other, out, m->nwords), KILN_EINVAL);

    /* Damaged serialized bytes are refused. */
    uint8_t *copy = malloc(size);
    memcpy(copy, bytes, size);
    copy[size / 2] ^= 0x40;
    struct kiln_pack_dict *bad = NULL;
    KT_CHECK_EQ(kiln_pack_dict_load(copy, size, &bad), KILN_ECORRUPT);
    KT_CHECK(bad == NULL);
    KT_CHECK_EQ(kiln_pack_dict_load(bytes, size - 1, &bad), KILN_ECORRUPT);
    KT_CHECK_EQ(kiln_pack_dict_load(bytes, 3, &bad), KILN_ECORRUPT);
    /* Too few samples to train on. */
    KT_CHECK_EQ(kiln_pack_dict_train(few, few_words, 3, 0, &bad), KILN_EINVAL);
    kiln_log_set_level(KILN_LOG_WARN);

    free(copy);
    free(out);
    kiln_pack_free(blob);
    kiln_pack_dict_destroy(dict);
    kiln_pack_dict_destroy(again);
    kiln_pack_dict_destroy(other);
    kiln_pack_dict_destroy(NULL);
    pc_free(&c);
}

KT_CASE(dictionaries_in_turn)
{
    /* A thread keeps a decompression context per recently used dictionary
     * (two): blobs of four dictionaries unpacked in turn, and a dictionary
     * destroyed and another made (possibly at the same address) in between,
     * all come back exact; without a dictionary in between as well. */
    struct pc_corpus c;
    KT_REQUIRE_OK(gm_load_any_or_skip(&c, 24));
    enum { NDICT = 4, NMOD = 8 };
    struct kiln_pack_dict *dict[NDICT];
    const uint32_t *few[16];
    size_t few_words[16];
    for (int k = 0; k < NDICT; k++) {
        for (int i = 0; i < 16; i++) {
            size_t j = ((size_t)i * NDICT + (size_t)k) % c.n;
            few[i] = c.m[j].words;
            few_words[i] = c.m[j].nwords;
        }
        KT_REQUIRE_OK(kiln_pack_dict_train(few, few_words, 16, 4096, &dict[k]));
    }
    void *blob[NDICT + 1][NMOD];
    size_t bs[NDICT + 1][NMOD], cap = 0;
    for (int i = 0; i < NMOD; i++)
        cap = KILN_MAX(cap, c.m[i].nwords);
    uint32_t *out = malloc(cap * 4);
    KT_REQUIRE(out != NULL);
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k <= NDICT; k++) {
            for (int i = 0; i < NMOD; i++)
                KT_REQUIRE_OK(kiln_pack(c.m[i].words, c.m[i].nwords, KILN_CODEC_KILN,
                                        k < NDICT ? dict[k] : NULL, &blob[k][i], &bs[k][i]));
        }
        /* In turn: 0, 1, 2, 3, none, 0, 1, ... and the other way round. */
        for (int pass = 0; pass < 3; pass++) {
            for (int i = 0; i < NMOD; i++) {
                for (int kk = 0; kk <= NDICT; kk++) {
                    int k = pass == 1 ? NDICT - kk : kk;
                    int64_t n =
                        kiln_unpack(blob[k][i], bs[k][i], k < NDICT ? dict[k] : NULL, out, cap);
                    KT_CHECK_EQ(n, (int64_t)c.m[i].nwords);
                    KT_CHECK(n < 0 || memcmp(out, c.m[i].words, (size_t)n * 4) == 0);
                }
            }
        }
        for (int k = 0; k <= NDICT; k++) {
            for (int i = 0; i < NMOD; i++)
                kiln_pack_free(blob[k][i]);
        }
        /* The next round packs with a dictionary made after one was freed. */
        kiln_pack_dict_destroy(dict[1]);
        for (int i = 0; i < 16; i++) {
            few[i] = c.m[(size_t)(i * 5 + 3) % c.n].words;
            few_words[i] = c.m[(size_t)(i * 5 + 3) % c.n].nwords;
        }
        KT_REQUIRE_OK(kiln_pack_dict_train(few, few_words, 16, 4096, &dict[1]));
    }
    free(out);
    for (int k = 0; k < NDICT; k++)
        kiln_pack_dict_destroy(dict[k]);
    pc_free(&c);
    kiln_pack_thread_cleanup();
}

KT_CASE(dictionary_makes_smaller)
{
    /* Measured on modules the dictionary did not see (odd indices). */
    struct pc_corpus c;
    KT_REQUIRE_OK(pc_load(&c));
    struct kiln_pack_dict *dict = NULL;
    KT_REQUIRE_OK(train_even(&c, &dict));
    size_t with = 0, without = 0, zstd = 0;
    for (size_t i = 1; i < c.n; i += 2) {
        size_t n[3];
        void *b;
        KT_REQUIRE_OK(kiln_pack(c.m[i].words, c.m[i].nwords, KILN_CODEC_KILN, dict, &b, &n[0]));
        kiln_pack_free(b);
        KT_REQUIRE_OK(kiln_pack(c.m[i].words, c.m[i].nwords, KILN_CODEC_KILN, NULL, &b, &n[1]));
        kiln_pack_free(b);
        KT_REQUIRE_OK(kiln_pack(c.m[i].words, c.m[i].nwords, KILN_CODEC_ZSTD, NULL, &b, &n[2]));
        kiln_pack_free(b);
        with += n[0];
        without += n[1];
        zstd += n[2];
    }
    KT_CHECK(without < zstd);
    KT_CHECK(with * 10 < without * 8);
    kiln_pack_dict_destroy(dict);
    pc_free(&c);
}

KT_CASE(program_payload)
{
    void *b[2];
    size_t n[2];
    KT_REQUIRE_OK(kiln_pack(pc_tiny_module, PC_TINY_WORDS, KILN_CODEC_KILN, NULL, &b[0], &n[0]));
    KT_REQUIRE_OK(kiln_pack(pc_tiny_module, PC_TINY_WORDS, KILN_CODEC_ZSTD, NULL, &b[1], &n[1]));
    struct kiln_stage_blob st[2] = {{.stage = 1, .blob = b[0], .blob_size = n[0]},
                                    {.stage = 2, .blob = b[1], .blob_size = n[1]}};
    void *payload;
    size_t size;
    KT_REQUIRE_OK(kiln_program_payload_build(st, 2, &payload, &size));
    KT_CHECK_EQ(size, 4 + 2 * 8 + n[0] + n[1]);
    struct kiln_stage_blob out[2];
    KT_CHECK_EQ(kiln_program_payload_parse(payload, size, 2, out), 2);
    for (int i = 0; i < 2; i++) {
        KT_CHECK_EQ(out[i].stage, st[i].stage);
        KT_CHECK_EQ(out[i].blob_size, n[i]);
        KT_CHECK(memcmp(out[i].blob, b[i], n[i]) == 0);
        const uint32_t *w;
        KT_CHECK_EQ(kiln_unpack_scratch(out[i].blob, out[i].blob_size, NULL, &w),
                    (int64_t)PC_TINY_WORDS);
    }
    kiln_log_set_level(KILN_LOG_ERROR);
    KT_CHECK_EQ(kiln_program_payload_parse(payload, size, 1, out), KILN_ERANGE);
    for (size_t cut = 0; cut < size; cut++) {
        void *copy = malloc(cut ? cut : 1);
        memcpy(copy, payload, cut);
        KT_CHECK_EQ(kiln_program_payload_parse(copy, cut, 2, out), KILN_ECORRUPT_BLOB);
        free(copy);
    }
    /* A byte too many, and a stage size that points past the end. */
    uint8_t *longer = malloc(size + 1);
    memcpy(longer, payload, size);
    longer[size] = 0;
    KT_CHECK_EQ(kiln_program_payload_parse(longer, size + 1, 2, out), KILN_ECORRUPT_BLOB);
    longer[4 + 4] += 1;
    KT_CHECK_EQ(kiln_program_payload_parse(longer, size, 2, out), KILN_ECORRUPT_BLOB);
    free(longer);
    /* Bad arguments to build. */
    void *p2;
    size_t s2;
    KT_CHECK_EQ(kiln_program_payload_build(st, 0, &p2, &s2), KILN_EINVAL);
    struct kiln_stage_blob junk = {.stage = 1, .blob = "junk", .blob_size = 4};
    KT_CHECK_EQ(kiln_program_payload_build(&junk, 1, &p2, &s2), KILN_ECORRUPT_BLOB);
    kiln_log_set_level(KILN_LOG_WARN);
    kiln_pack_free(payload);
    kiln_pack_free(b[0]);
    kiln_pack_free(b[1]);
}

KT_MAIN(KT_ENTRY(header_and_info), KT_ENTRY(codec_names), KT_ENTRY(not_spirv_packs_raw),
        KT_ENTRY(odd_modules_round_trip), KT_ENTRY(corpus_round_trip),
        KT_ENTRY(truncation_and_bit_flips), KT_ENTRY(checksum_is_checked),
        KT_ENTRY(unpack_arguments), KT_ENTRY(dictionary), KT_ENTRY(dictionaries_in_turn),
        KT_ENTRY(dictionary_makes_smaller), KT_ENTRY(program_payload))

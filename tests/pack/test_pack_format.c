/*
 * test_pack_format.c - blob formats 4, 3 and 2 against format 1: blobs of
 * formats 1 to 3 (fixtures made before the next format existed, and the
 * older encoders kept for tests) still unpack; format 4 (transform 2, the
 * seal over the packed bytes, the built-in dictionary) round-trips the
 * corpus and generated emulator-like programs, is smaller than format 1,
 * and refuses damaged blobs cleanly, as formats 3 and 2 do.
 */
#include "pack_corpus.h"
#include "../support/gen_modules.h"
#include "pack_internal.h"

#include <inttypes.h>
#include <stdio.h>

#define FIXTURES  KILN_SOURCE_DIR "/tests/pack/fixtures/v1"
#define FIXTURES2 KILN_SOURCE_DIR "/tests/pack/fixtures/v2"
#define FIXTURES3 KILN_SOURCE_DIR "/tests/pack/fixtures/v3"

static int read_fixture_in(const char *dir, const char *name, void **data, size_t *n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return kiln_io_read_file(kiln_io_default(), path, 1u << 20, data, n);
}

static int read_fixture(const char *name, void **data, size_t *n)
{
    return read_fixture_in(FIXTURES, name, data, n);
}

/* kiln_pack in blob format `f` (2, 3 or 4). */
static int pack_in(int f, const uint32_t *words, size_t nwords, enum kiln_codec codec,
                   const struct kiln_pack_dict *dict, void **blob, size_t *blob_size)
{
    return f == 2   ? kiln__pack_format2(words, nwords, codec, dict, blob, blob_size)
           : f == 3 ? kiln__pack_format3(words, nwords, codec, dict, blob, blob_size)
                    : kiln_pack(words, nwords, codec, dict, blob, blob_size);
}

/* The kind byte's top bits per format. */
static unsigned format_tag(int f)
{
    return f == 2 ? 0xA0u : f == 3 ? 0xC0u : 0xE0u;
}

/* @return whether unpacking gave a clean error or exactly `words`. */
static bool error_or_exact(const void *blob, size_t n, const struct kiln_pack_dict *dict,
                           const uint32_t *words, size_t nwords, uint32_t *out, size_t out_words)
{
    int64_t r = kiln_unpack(blob, n, dict, out, out_words);
    if (r < 0)
        return r == KILN_ECORRUPT_BLOB || r == KILN_EINVAL || r == KILN_ERANGE;
    return (size_t)r == nwords && memcmp(out, words, nwords * 4) == 0;
}

/* `rounds` random bit flips of `blob`, one at a time and each undone: every
 * one unpacks to a clean error or exactly `words`. */
static void flips_refused(void *blob, size_t size, const struct kiln_pack_dict *dict,
                          const uint32_t *words, size_t nwords, uint32_t *out, size_t out_words,
                          int rounds, uint64_t *rng)
{
    uint8_t *b = blob;
    for (int k = 0; k < rounds; k++) {
        size_t bit = kt_rand(rng) % (size * 8);
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        KT_CHECK(error_or_exact(blob, size, dict, words, nwords, out, out_words));
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
}

/* ---- generated emulator-like modules -------------------------------------- */

struct gen {
    uint32_t *head, *body; /* the module-level section and the functions */
    size_t nh, nb, cap;
    uint32_t next_id;
    uint64_t rng;
};

static void emit(uint32_t *w, size_t *n, uint32_t op, const uint32_t *ops, uint32_t nops)
{
    w[(*n)++] = (nops + 1) << 16 | op;
    for (uint32_t i = 0; i < nops; i++)
        w[(*n)++] = ops[i];
}

#define H(op, ...)                                             \
    emit(g->head, &g->nh, op, (const uint32_t[]){__VA_ARGS__}, \
         sizeof((uint32_t[]){__VA_ARGS__}) / 4)
#define B(op, ...)                                             \
    emit(g->body, &g->nb, op, (const uint32_t[]){__VA_ARGS__}, \
         sizeof((uint32_t[]){__VA_ARGS__}) / 4)

/*
 * A module shaped like an emulator's translated shader (unoptimized
 * compiler output): names, decorations with OpMemberDecorate runs, types,
 * constants made on first use (so their ids fall among the function's, as
 * compilers number them), global and function-local variables, loads,
 * stores, access chains, arithmetic, GLSL.std.450 calls, branches, phis and
 * a call. Not valid for a driver; its statistics are what matter.
 * @return the word count (g->head holds the module).
 */
static size_t gen_module(struct gen *g, uint64_t seed, unsigned ops)
{
    g->nh = g->nb = 0;
    g->next_id = 1;
    g->rng = seed;
    uint32_t *h = g->head;
    h[0] = 0x07230203u;
    h[1] = 0x00010300u;
    h[2] = 0x0008000Bu;
    h[3] = 0; /* the bound, at the end */
    h[4] = 0;
    g->nh = 5;
    uint32_t glsl = g->next_id++, tvoid = g->next_id++, tfn = g->next_id++, tf = g->next_id++,
             ti = g->next_id++, tv4 = g->next_id++, tpf = g->next_id++, tpv4 = g->next_id++,
             tstruct = g->next_id++, tpu = g->next_id++, ubo = g->next_id++, out = g->next_id++,
             tpo = g->next_id++, mainf = g->next_id++, helper = g->next_id++;
    H(17, 1);
    H(11, glsl, 0x4c534c47, 0x6474732e, 0x3035342e, 0); /* "GLSL.std.450" */
    H(14, 0, 1);
    H(15, 4, mainf, 0x6e69616d, 0, out);
    H(16, mainf, 7);
    H(5, mainf, 0x6e69616d, 0);
    H(5, ubo, 0x006f6275);
    H(5, tstruct, 0x004f4255);
    for (uint32_t m = 0; m < 6; m++)
        H(6, tstruct, m, 0x626d656d, 0x00000065 + m);
    for (uint32_t m = 0; m < 6; m++) {
        H(72, tstruct, m, 35, m * 16);
        if (m == 3)
            H(72, tstruct, m, 5); /* ColMajor */
    }
    H(71, tstruct, 2);
    H(71, ubo, 34, 0);
    H(71, ubo, 33, 1);
    H(71, out, 30, 0);
    H(19, tvoid);
    H(33, tfn, tvoid);
    H(22, tf, 32);
    H(21, ti, 32, 1);
    H(23, tv4, tf, 4);
    H(32, tpf, 7, tf);
    H(32, tpv4, 7, tv4);
    H(30, tstruct, tv4, tv4, tv4, tv4, tv4, tv4);
    H(32, tpu, 2, tstruct);
    H(59, tpu, ubo, 2);
    H(32, tpo, 3, tv4);
    H(59, tpo, out, 3);

    uint32_t consts[16];
    for (int i = 0; i < 16; i++)
        consts[i] = 0;
    /* The helper: one parameter, returns void. */
    uint32_t param = g->next_id++, hl = g->next_id++;
    B(54, tvoid, helper, 0, tfn);
    B(55, tpf, param);
    B(248, hl);
    B(253);
    B(56);
    /* main */
    uint32_t l0 = g->next_id++;
    B(54, tvoid, mainf, 0, tfn);
    B(248, l0);
    uint32_t locals[4];
    for (int i = 0; i < 4; i++) {
        locals[i] = g->next_id++;
        B(59, i & 1 ? tpf : tpv4, locals[i], 7);
    }
    uint32_t last = 0, lastf = 0;
    for (unsigned k = 0; k < ops; k++) {
        uint64_t r = kt_rand(&g->rng);
        unsigned ci = (unsigned)(r >> 8) % 16;
        if (consts[ci] == 0) {
            consts[ci] = g->next_id++; /* made on first use, among the function's ids */
            if (ci < 8)
                H(43, ti, consts[ci], ci);
            else
                H(43, tf, consts[ci], 0x3f800000u + (uint32_t)ci * 0x100000u);
        }
        uint32_t id = g->next_id++;
        switch (r % 9) {
        case 0:
            B(65, tpv4, id, ubo, consts[ci % 6]);
            last = id;
            break;
        case 1:
            B(61, tv4, id, last ? last : locals[0]);
            last = id;
            break;
        case 2:
            B(62, locals[ci % 4], last ? last : consts[ci]);
            g->next_id--;
            break;
        case 3:
            B(81, tf, id, last ? last : consts[8], (uint32_t)ci % 4);
            lastf = id;
            break;
        case 4:
            B(129, tv4, id, last ? last : consts[8], last ? last : consts[9]);
            last = id;
            break;
        case 5:
            B(12, tf, id, glsl, 13, lastf ? lastf : consts[8]); /* Sin */
            lastf = id;
            break;
        case 6: {
            uint32_t l1 = id, l2 = g->next_id++, c = g->next_id++;
            B(180, 20, c, lastf ? lastf : consts[8], consts[9]);
            B(247, l2, 0);
            B(250, c, l1, l2);
            B(248, l1);
            B(249, l2);
            B(248, l2);
            break;
        }
        case 7:
            B(79, tv4, id, last ? last : consts[8], last ? last : consts[8], 3, 2, 1, 0);
            last = id;
            break;
        default:
            B(57, tvoid, id, helper, locals[1]);
            break;
        }
    }
    B(62, out, last ? last : locals[0]);
    B(253);
    B(56);
    memcpy(g->head + g->nh, g->body, g->nb * 4);
    g->nh += g->nb;
    g->head[3] = g->next_id;
    return g->nh;
}

static bool gen_init(struct gen *g, unsigned ops)
{
    g->cap = 64 + (size_t)ops * 24;
    g->head = malloc(g->cap * 4);
    g->body = malloc(g->cap * 4);
    return g->head && g->body;
}

static void gen_free(struct gen *g)
{
    free(g->head);
    free(g->body);
}

/* ---- cases ---------------------------------------------------------------- */

KT_CASE(format_header)
{
    /* kiln_pack makes format 4 (formats 3 and 2 are made for this test);
     * the kind byte names the format, the codec and the caller's
     * dictionary, and a one-block payload drops zstd's frame header. Format
     * 2 checks the SPIR-V; formats 3 and 4 seal the packed bytes and the
     * dictionary's whole id, the built-in one's in format 4 when the caller
     * gives none. */
    struct gen g;
    KT_REQUIRE(gen_init(&g, 400));
    size_t n = gen_module(&g, 7, 400);
    const uint32_t *mods[16];
    size_t words[16];
    uint32_t *copies[16];
    struct gen gd;
    KT_REQUIRE(gen_init(&gd, 300));
    for (int i = 0; i < 16; i++) {
        words[i] = gen_module(&gd, 100 + (uint64_t)i, 300);
        copies[i] = malloc(words[i] * 4);
        KT_REQUIRE(copies[i] != NULL);
        memcpy(copies[i], gd.head, words[i] * 4);
        mods[i] = copies[i];
    }
    struct kiln_pack_dict *dict;
    KT_REQUIRE_OK(kiln_pack_dict_train(mods, words, 16, 4096, &dict));
    uint32_t *out = malloc(n * 4);
    KT_REQUIRE(out != NULL);
    for (int fv = 0; fv < 12; fv++) {
        int f = 4 - fv / 4, v = fv % 4;
        enum kiln_codec codec = v < 3 ? (enum kiln_codec)v : KILN_CODEC_KILN;
        const struct kiln_pack_dict *d = v == 3 ? dict : NULL;
        void *blob;
        size_t bs;
        KT_REQUIRE_OK(pack_in(f, g.head, n, codec, d, &blob, &bs));
        uint8_t *b = blob;
        /* Format 4's kiln codec without a caller's dictionary writes format
         * 3's kind when the module packs smaller without the built-in one. */
        int want = f == 4 && v == 2 && (b[0] & 0xE0) == 0xC0 ? 3 : f;
        KT_CHECK_EQ(kiln__blob_format(blob, bs), want);
        KT_CHECK_EQ(b[0] & 0xE3, format_tag(want) | (unsigned)codec);
        KT_CHECK_EQ((b[0] & 0x04) != 0, v == 3);
        KT_CHECK_EQ((b[0] & 0x08) != 0, codec != KILN_CODEC_RAW); /* one block */
        /* kind, the word count, the checksum, the dictionary's low 16 bits */
        size_t hl = n < 128 ? 2 : n < 16384 ? 3 : 4;
        uint64_t id = kiln_pack_dict_id(dict);
        if (f == 2) {
            KT_CHECK_EQ(kiln__load_le32(b + hl), (uint32_t)kiln_hash64(g.head, n * 4));
            KT_CHECK_EQ(kiln__blob_seal(blob, bs, id), KILN_EINVAL);
        } else {
            KT_CHECK_EQ(kiln__blob_seal(blob, bs, id), (int64_t)kiln__load_le32(b + hl));
            /* Another dictionary sharing the id's low 16 bits fails the seal. */
            if (v == 3)
                KT_CHECK(kiln__blob_seal(blob, bs, id ^ 0x10000u) !=
                         (int64_t)kiln__load_le32(b + hl));
            /* Format 4's kiln codec without a caller's dictionary is sealed
             * with the built-in one's id, whatever id the caller passes. */
            if (f == 4 && v == 2)
                KT_CHECK_EQ(kiln__blob_seal(blob, bs, 0), (int64_t)kiln__load_le32(b + hl));
        }
        if (v == 3)
            KT_CHECK_EQ(kiln__load_le16(b + hl + 4), (uint16_t)kiln_pack_dict_id(dict));
        KT_CHECK_EQ(kiln_unpack(blob, bs, d, out, n), (int64_t)n);
        KT_CHECK(memcmp(out, g.head, n * 4) == 0);
        /* Every kind byte: refused, or (the original) exact. Never wrong words. */
        kiln_log_set_level(KILN_LOG_ERROR);
        uint8_t kind = b[0];
        for (unsigned k = 0; k < 256; k++) {
            b[0] = (uint8_t)k;
            KT_CHECK(error_or_exact(blob, bs, dict, g.head, n, out, n));
        }
        b[0] = kind;
        kiln_log_set_level(KILN_LOG_WARN);
        kiln_pack_free(blob);
    }
    for (int i = 0; i < 16; i++)
        free(copies[i]);
    free(out);
    kiln_pack_dict_destroy(dict);
    gen_free(&g);
    gen_free(&gd);
}

KT_CASE(v1_fixtures_unpack)
{
    /* Blobs that the pack module made before format 2 (fixtures/v1) unpack
     * with today's decoder; their checksum (XXH3-64) proves the words. */
    void *kpd;
    size_t kn;
    KT_REQUIRE_OK(read_fixture("dict.kpd", &kpd, &kn));
    struct kiln_pack_dict *dict;
    KT_REQUIRE_OK(kiln_pack_dict_load(kpd, kn, &dict));
    static const struct {
        const char *name;
        enum kiln_codec codec;
        bool dict;
    } fx[] = {
        {"gen00-raw.blob", KILN_CODEC_RAW, false},
        {"gen00-zstd.blob", KILN_CODEC_ZSTD, false},
        {"gen00-kiln.blob", KILN_CODEC_KILN, false},
        {"gen00-kiln-dict.blob", KILN_CODEC_KILN, true},
        {"gen01-kiln.blob", KILN_CODEC_KILN, false},
        {"gen02-kiln.blob", KILN_CODEC_KILN, false},
        {"gen02-kiln-dict.blob", KILN_CODEC_KILN, true},
        {"gen03-kiln.blob", KILN_CODEC_KILN, false},
        {"gen04-kiln.blob", KILN_CODEC_KILN, false},
        {"gen04-kiln-dict.blob", KILN_CODEC_KILN, true},
        {"gen05-kiln.blob", KILN_CODEC_KILN, false},
        {"gen06-kiln.blob", KILN_CODEC_KILN, false},
        {"gen06-kiln-dict.blob", KILN_CODEC_KILN, true},
        {"gen07-kiln.blob", KILN_CODEC_KILN, false},
        {"cut-kiln.blob", KILN_CODEC_ZSTD, false},
        {"notspirv-kiln.blob", KILN_CODEC_RAW, false},
    };
    const uint32_t *first = NULL;
    size_t first_n = 0;
    for (size_t i = 0; i < KILN_ARRAY_LEN(fx); i++) {
        void *blob;
        size_t bs, bytes;
        KT_REQUIRE_OK(read_fixture(fx[i].name, &blob, &bs));
        enum kiln_codec codec;
        KT_CHECK_EQ(kiln__blob_format(blob, bs), 1);
        KT_CHECK_OK(kiln_blob_info(blob, bs, &codec, &bytes));
        KT_CHECK_EQ(codec, fx[i].codec);
        const uint32_t *w = NULL;
        int64_t nw = kiln_unpack_scratch(blob, bs, fx[i].dict ? dict : NULL, &w);
        KT_CHECK_EQ(nw, (int64_t)(bytes / 4));
        if (nw > 0 && i == 0) {
            first_n = (size_t)nw;
            first = malloc(first_n * 4);
            KT_REQUIRE(first != NULL);
            memcpy((void *)first, w, first_n * 4);
        }
        /* gen00 is the same module with every codec. */
        if (nw > 0 && i < 4) {
            KT_CHECK_EQ((size_t)nw, first_n);
            KT_CHECK(memcmp(w, first, first_n * 4) == 0);
        }
        /* Packed again, it is format 4 and the same words. */
        if (nw > 0) {
            uint32_t *copy = malloc((size_t)nw * 4);
            KT_REQUIRE(copy != NULL);
            memcpy(copy, w, (size_t)nw * 4);
            void *b2;
            size_t s2;
            KT_REQUIRE_OK(kiln_pack(copy, (size_t)nw, codec, fx[i].dict ? dict : NULL, &b2, &s2));
            KT_CHECK_EQ(kiln__blob_format(b2, s2), 4);
            KT_CHECK_EQ(kiln_unpack_scratch(b2, s2, fx[i].dict ? dict : NULL, &w), nw);
            KT_CHECK(memcmp(w, copy, (size_t)nw * 4) == 0);
            kiln_pack_free(b2);
            free(copy);
        }
        if (fx[i].dict) {
            kiln_log_set_level(KILN_LOG_ERROR);
            KT_CHECK_EQ(kiln_unpack_scratch(blob, bs, NULL, &w), KILN_EINVAL);
            kiln_log_set_level(KILN_LOG_WARN);
        }
        free(blob);
    }
    /* A damaged format-1 blob is refused, never wrong. */
    void *blob;
    size_t bs;
    KT_REQUIRE_OK(read_fixture("gen02-kiln.blob", &blob, &bs));
    uint32_t *out = malloc(4096 * 4);
    KT_REQUIRE(out != NULL);
    int64_t good = kiln_unpack(blob, bs, NULL, out, 4096);
    KT_REQUIRE(good > 0);
    uint32_t *ref = malloc((size_t)good * 4);
    KT_REQUIRE(ref != NULL);
    memcpy(ref, out, (size_t)good * 4);
    kiln_log_set_level(KILN_LOG_ERROR);
    for (size_t cut = 0; cut < bs; cut++)
        KT_CHECK(kiln_unpack(blob, cut, NULL, out, 4096) < 0);
    uint64_t rng = 16;
    flips_refused(blob, bs, NULL, ref, (size_t)good, out, 4096, 2000, &rng);
    kiln_log_set_level(KILN_LOG_WARN);
    free(blob);
    free(out);
    free(ref);
    free((void *)first);
    free(kpd);
    kiln_pack_dict_destroy(dict);
    kiln_pack_thread_cleanup();
}

/*
 * Blobs of format `f` that the pack module made before format f + 1
 * (fixtures/v2, v3) unpack with today's decoder to the words of the
 * format-1 fixture of the same name; packed again in format f they are as
 * long, and kiln_pack makes format 4 of them; damage is refused.
 */
static void check_old_fixtures(const char *dir, int f)
{
    void *kpd;
    size_t kn;
    KT_REQUIRE_OK(read_fixture("dict.kpd", &kpd, &kn));
    struct kiln_pack_dict *dict;
    KT_REQUIRE_OK(kiln_pack_dict_load(kpd, kn, &dict));
    static const char *const names[] = {
        "gen00-raw.blob",       "gen00-zstd.blob", "gen00-kiln.blob",
        "gen00-kiln-dict.blob", "gen02-kiln.blob", "gen02-kiln-dict.blob",
        "gen05-kiln.blob",      "cut-kiln.blob",   "notspirv-kiln.blob",
    };
    uint32_t *ref = malloc(8192 * 4), *out = malloc(8192 * 4);
    KT_REQUIRE(ref && out);
    uint64_t rng = 23;
    for (size_t i = 0; i < KILN_ARRAY_LEN(names); i++) {
        const struct kiln_pack_dict *d = strstr(names[i], "-dict") ? dict : NULL;
        void *v1, *old;
        size_t s1, so;
        KT_REQUIRE_OK(read_fixture(names[i], &v1, &s1));
        KT_REQUIRE_OK(read_fixture_in(dir, names[i], &old, &so));
        KT_CHECK_EQ(kiln__blob_format(old, so), f);
        int64_t n1 = kiln_unpack(v1, s1, d, ref, 8192);
        int64_t n2 = kiln_unpack(old, so, d, out, 8192);
        KT_REQUIRE(n1 > 0);
        KT_CHECK_EQ(n2, n1);
        KT_CHECK(memcmp(out, ref, (size_t)n1 * 4) == 0);
        enum kiln_codec codec;
        KT_CHECK_OK(kiln_blob_info(old, so, &codec, NULL));
        void *again, *b4;
        size_t sa, s4;
        KT_REQUIRE_OK(pack_in(f, ref, (size_t)n1, codec, d, &again, &sa));
        KT_CHECK_EQ(sa, so);
        KT_REQUIRE_OK(kiln_pack(ref, (size_t)n1, codec, d, &b4, &s4));
        KT_CHECK_EQ(kiln__blob_format(b4, s4), 4);
        KT_CHECK_EQ(kiln_unpack(b4, s4, d, out, 8192), n1);
        KT_CHECK(memcmp(out, ref, (size_t)n1 * 4) == 0);
        kiln_pack_free(again);
        kiln_pack_free(b4);
        kiln_log_set_level(KILN_LOG_ERROR);
        flips_refused(old, so, d, ref, (size_t)n1, out, 8192, 500, &rng);
        kiln_log_set_level(KILN_LOG_WARN);
        free(v1);
        free(old);
    }
    free(ref);
    free(out);
    free(kpd);
    kiln_pack_dict_destroy(dict);
    kiln_pack_thread_cleanup();
}

KT_CASE(v2_fixtures_unpack)
{
    check_old_fixtures(FIXTURES2, 2);
}

KT_CASE(v3_fixtures_unpack)
{
    check_old_fixtures(FIXTURES3, 3);
}

/* Trains a 4 KiB dictionary on eight modules spread over `c`. */
static int train_on_eighths(const struct pc_corpus *c, struct kiln_pack_dict **dict)
{
    const uint32_t *mods[8];
    size_t words[8];
    for (int i = 0; i < 8; i++) {
        mods[i] = c->m[i * c->n / 8].words;
        words[i] = c->m[i * c->n / 8].nwords;
    }
    return kiln_pack_dict_train(mods, words, 8, 4096, dict);
}

/* @return the payload's size of a format-4 blob (the header is 6 to 11 bytes). */
static size_t payload_size(const void *blob, size_t size)
{
    const uint8_t *b = blob;
    size_t i = 1;
    while (b[i] & 0x80)
        i++;
    return size - (i + 1 + 4 + (b[0] & 0x04 ? 2 : 0));
}

/* The literals section's type of a block's content: 0 raw, 1 one byte
 * repeated, 2 Huffman-coded with a table of its own, 3 with the
 * dictionary's (or the previous block's). */
static int block_literals(const uint8_t *block)
{
    return block[0] & 3;
}

/*
 * The literals of a format-4 blob of the kiln codec: 0 when every
 * compressed block stores them raw, else the first other type
 * (block_literals); -1 when no block is compressed. The payload is one
 * block's content (kind bits 3 and 4) or a frame without zstd's magic.
 */
static int literals_type(const void *blob, size_t size)
{
    const uint8_t *k = blob;
    size_t n = payload_size(blob, size);
    const uint8_t *p = k + size - n;
    if (k[0] & 0x08)
        return k[0] & 0x10 ? block_literals(p) : -1;
    ZSTD_frameHeader fh;
    if (ZSTD_getFrameHeader_advanced(&fh, p, n, ZSTD_f_zstd1_magicless) != 0)
        return -1;
    int type = -1;
    for (size_t at = fh.headerSize; at + 3 <= n;) {
        uint32_t bh = (uint32_t)p[at] | (uint32_t)p[at + 1] << 8 | (uint32_t)p[at + 2] << 16;
        uint32_t btype = bh >> 1 & 3, bsize = bh >> 3;
        if (btype == 2 && at + 3 < n) {
            int t = block_literals(p + at + 3);
            type = type <= 0 ? t : type;
        }
        if (bh & 1)
            break;
        at += 3 + (btype == 1 ? 1 : bsize);
    }
    return type;
}

KT_CASE(builtin_dictionary)
{
    /* Format 4 packs the kiln codec's modules of up to 64 KiB with the
     * built-in dictionary and raw literals when the caller gives none: no
     * dictionary id in the header, smaller than format 3, and unpacked with
     * no dictionary or with any caller's. Larger modules are packed without
     * one, their literals raw as well. The built-in bytes are the pinned
     * ones. */
    const struct kiln_pack_dict *bi = kiln__pack_builtin();
    KT_REQUIRE(bi != NULL);
    KT_CHECK_EQ(kiln_pack_dict_id(bi), KILN__BUILTIN_DICT_ID);
    KT_CHECK(kiln__pack_builtin() == bi); /* made once */
    struct pc_corpus c;
    KT_REQUIRE_OK(gm_load_any_or_skip(&c, 24));
    struct kiln_pack_dict *other;
    KT_REQUIRE_OK(train_on_eighths(&c, &other));
    size_t bytes3 = 0, bytes4 = 0, small = 0, large = 0, plains = 0;
    for (size_t i = 0; i < c.n; i++) {
        const struct pc_module *m = &c.m[i];
        void *b3, *b4;
        size_t s3, s4;
        KT_REQUIRE_OK(kiln__pack_format3(m->words, m->nwords, KILN_CODEC_KILN, NULL, &b3, &s3));
        KT_REQUIRE_OK(kiln_pack(m->words, m->nwords, KILN_CODEC_KILN, NULL, &b4, &s4));
        enum kiln_codec codec;
        KT_CHECK_OK(kiln_blob_info(b4, s4, &codec, NULL));
        const uint8_t *k = b4;
        /* Format 4, no caller's dictionary; or format 3's kind, no
         * dictionary at all, where the built-in one would have made the
         * module larger (builtin_never_larger). */
        bool plain = (k[0] & 0xE0) == 0xC0;
        KT_CHECK_EQ(k[0] & 0xE4, plain ? 0xC0 : 0xE0);
        if (plain) {
            KT_CHECK_EQ(codec, KILN_CODEC_KILN);
            KT_CHECK(m->nwords * 4 <= 64 * 1024);
            plains++;
        } else if (codec == KILN_CODEC_KILN && m->nwords * 4 > 64 * 1024) {
            KT_CHECK_EQ(k[0] & 0xE7, 0xE2); /* packed without a dictionary */
            large++;
        } else if (codec == KILN_CODEC_KILN) {
            small++;
        }
        /* Its literals are stored raw (when a block is compressed at all). */
        int literals = codec == KILN_CODEC_KILN && !plain ? literals_type(b4, s4) : -1;
        if (literals >= 0)
            KT_CHECK_EQ(literals, 0);
        bytes3 += s3;
        bytes4 += s4;
        const uint32_t *w;
        KT_CHECK_EQ(kiln_unpack_scratch(b4, s4, NULL, &w), (int64_t)m->nwords);
        KT_CHECK(memcmp(w, m->words, m->nwords * 4) == 0);
        KT_CHECK_EQ(kiln_unpack_scratch(b4, s4, other, &w), (int64_t)m->nwords);
        KT_CHECK(memcmp(w, m->words, m->nwords * 4) == 0);
        kiln_pack_free(b3);
        kiln_pack_free(b4);
    }
    KT_CHECK(small > 0);
    KT_CHECK(bytes4 < bytes3);
    /* A module over 64 KiB (the corpus may have none). */
    struct gen g;
    KT_REQUIRE(gen_init(&g, 20000));
    size_t gn = gen_module(&g, 3, 20000);
    KT_REQUIRE(gn * 4 > 64 * 1024);
    void *b3, *b4;
    size_t s3, s4;
    KT_REQUIRE_OK(kiln__pack_format3(g.head, gn, KILN_CODEC_KILN, NULL, &b3, &s3));
    KT_REQUIRE_OK(kiln_pack(g.head, gn, KILN_CODEC_KILN, NULL, &b4, &s4));
    KT_CHECK_EQ(((const uint8_t *)b4)[0] & 0xE7, 0xE2); /* format 4, kiln, no dictionary */
    KT_CHECK_EQ(literals_type(b4, s4), 0);
    KT_CHECK_EQ(literals_type(b3, s3), 2); /* format 3 kept zstd's choice */
    const uint32_t *w;
    KT_CHECK_EQ(kiln_unpack_scratch(b4, s4, NULL, &w), (int64_t)gn);
    KT_CHECK(memcmp(w, g.head, gn * 4) == 0);
    kiln_pack_free(b3);
    kiln_pack_free(b4);
    gen_free(&g);
    printf("built-in dictionary: %zu modules (%zu with it, %zu smaller without it, %zu over 64 "
           "KiB): %zu bytes, format 3 %zu\n",
           c.n, small, plains, large, bytes4, bytes3);
    kiln_pack_dict_destroy(other);
    pc_free(&c);
    kiln_pack_thread_cleanup();
}

/*
 * A module unlike anything the built-in dictionary was trained on: a header
 * and `names` OpNames of 23 random letters out of 16 each. Nothing repeats
 * for zstd to match; Huffman-coded literals halve the names, and the
 * built-in dictionary's blobs store literals raw. @return its word count.
 */
static size_t unlike_module(uint32_t *w, size_t names, uint64_t seed)
{
    size_t n = 0;
    w[n++] = 0x07230203u;
    w[n++] = 0x00010000u;
    w[n++] = 0;
    w[n++] = (uint32_t)names + 1;
    w[n++] = 0;
    w[n++] = 2u << 16 | 17; /* OpCapability Shader */
    w[n++] = 1;
    w[n++] = 3u << 16 | 14; /* OpMemoryModel Logical GLSL450 */
    w[n++] = 0;
    w[n++] = 1;
    for (size_t i = 0; i < names; i++) {
        w[n++] = 8u << 16 | 5; /* OpName: target, 24 bytes of string */
        w[n++] = (uint32_t)i + 1;
        uint8_t str[24];
        for (int k = 0; k < 23; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            str[k] = (uint8_t)('a' + (seed >> 60));
        }
        str[23] = 0;
        memcpy(&w[n], str, 24);
        n += 6;
    }
    return n;
}

KT_CASE(builtin_never_larger)
{
    /* The built-in dictionary never makes a module larger than the
     * module's streams at zstd -3 without one: kiln_pack keeps the smaller
     * and writes format 3's kind (no dictionary) for the plain one. A
     * module unlike the dictionary's training set gets the plain blob; the
     * corpus (the negative control) mostly keeps the dictionary, and every
     * module is no larger than its plain blob. */
    static uint32_t w[300 * 8 + 16];
    size_t n = unlike_module(w, 300, 5);
    void *b, *p;
    size_t bs, ps;
    KT_REQUIRE_OK(kiln_pack(w, n, KILN_CODEC_KILN, NULL, &b, &bs));
    KT_REQUIRE_OK(kiln__pack_plain(w, n, 3, &p, &ps));
    KT_CHECK_EQ(((const uint8_t *)b)[0] & 0xE7, 0xC2); /* format 3's kind, kiln, no dictionary */
    KT_CHECK_EQ(kiln__blob_format(b, bs), 3);
    KT_CHECK_EQ(bs, ps);
    KT_CHECK(memcmp(b, p, bs) == 0);
    const uint32_t *out;
    KT_CHECK_EQ(kiln_unpack_scratch(b, bs, NULL, &out), (int64_t)n);
    KT_CHECK(memcmp(out, w, n * 4) == 0);
    kiln_pack_free(b);
    kiln_pack_free(p);

    struct pc_corpus c;
    KT_REQUIRE_OK(gm_load_any_or_skip(&c, 24));
    size_t with = 0, without = 0, bytes = 0, plain_bytes = 0;
    for (size_t i = 0; i < c.n; i++) {
        const struct pc_module *m = &c.m[i];
        if (m->nwords * 4 > 64 * 1024)
            continue;
        KT_REQUIRE_OK(kiln_pack(m->words, m->nwords, KILN_CODEC_KILN, NULL, &b, &bs));
        KT_REQUIRE_OK(kiln__pack_plain(m->words, m->nwords, 3, &p, &ps));
        enum kiln_codec codec;
        KT_CHECK_OK(kiln_blob_info(b, bs, &codec, NULL));
        if (codec == KILN_CODEC_KILN) {
            KT_CHECK(bs <= ps);
            bool used = (((const uint8_t *)b)[0] & 0xE0) == 0xE0;
            with += used;
            without += !used;
            bytes += bs;
            plain_bytes += ps;
        }
        KT_CHECK_EQ(kiln_unpack_scratch(b, bs, NULL, &out), (int64_t)m->nwords);
        KT_CHECK(memcmp(out, m->words, m->nwords * 4) == 0);
        kiln_pack_free(b);
        kiln_pack_free(p);
    }
    KT_CHECK(with > 0); /* the negative control: the dictionary wins and is used */
    KT_CHECK(bytes < plain_bytes);
    printf("built-in dictionary kept for %zu modules, left out for %zu: %zu bytes, plain zstd -3 "
           "%zu\n",
           with, without, bytes, plain_bytes);
    pc_free(&c);
    kiln_pack_thread_cleanup();
}

KT_CASE(level_max)
{
    /* kiln_pack_with at the shipping level: the same words back, with or
     * without a caller's dictionary, every codec, and without one no larger
     * than the default level; numbered levels pack too; bad options are
     * refused. */
    struct pc_corpus c;
    KT_REQUIRE_OK(gm_load_any_or_skip(&c, 24));
    struct kiln_pack_dict *dict;
    KT_REQUIRE_OK(train_on_eighths(&c, &dict));
    size_t count = KILN_MIN(c.n, (size_t)120);
    size_t bytes[2][2] = {{0}}; /* [dictionary][max] */
    for (size_t i = 0; i < count; i++) {
        const struct pc_module *m = &c.m[i * c.n / count];
        for (int v = 0; v < 6; v++) {
            struct kiln_pack_options o = KILN_PACK_OPTIONS_INIT;
            o.codec = v < 4 ? KILN_CODEC_KILN : v == 4 ? KILN_CODEC_ZSTD : KILN_CODEC_RAW;
            o.dict = v == 1 || v == 3 ? dict : NULL;
            o.level = v < 2 ? KILN_PACK_LEVEL_DEFAULT : KILN_PACK_LEVEL_MAX;
            void *b;
            size_t bs;
            KT_REQUIRE_OK(kiln_pack_with(m->words, m->nwords, &o, &b, &bs));
            if (v < 4)
                bytes[v % 2][v / 2] += bs;
            const uint32_t *out;
            KT_CHECK_EQ(kiln_unpack_scratch(b, bs, o.dict, &out), (int64_t)m->nwords);
            KT_CHECK(memcmp(out, m->words, m->nwords * 4) == 0);
            kiln_pack_free(b);
        }
    }
    /* Without the caller's dictionary the shipping level is never larger.
     * With this small one (4 KiB, eight modules) its raw literals cost more
     * than the default's Huffman-coded ones: not asserted (pack-format.md,
     * "Levels"). */
    KT_CHECK(bytes[0][1] <= bytes[0][0]);
    printf("%zu modules: default %zu B (dictionary %zu B), max %zu B (dictionary %zu B)\n", count,
           bytes[0][0], bytes[1][0], bytes[0][1], bytes[1][1]);
    const struct pc_module *m = &c.m[0];
    struct kiln_pack_options o = KILN_PACK_OPTIONS_INIT;
    o.codec = KILN_CODEC_KILN;
    void *b;
    size_t bs;
    o.level = 19;
    KT_CHECK_OK(kiln_pack_with(m->words, m->nwords, &o, &b, &bs));
    kiln_pack_free(b);
    kiln_log_set_level(KILN_LOG_ERROR + 1);
    static const int32_t bad[] = {-1, 23, KILN_PACK_LEVEL_MAX + 1};
    for (size_t i = 0; i < KILN_ARRAY_LEN(bad); i++) {
        o.level = bad[i];
        KT_CHECK_EQ(kiln_pack_with(m->words, m->nwords, &o, &b, &bs), KILN_EINVAL);
    }
    KT_CHECK_EQ(kiln_pack_with(m->words, m->nwords, NULL, &b, &bs), KILN_EINVAL);
    o.level = 0;
    o.size = 0;
    KT_CHECK_EQ(kiln_pack_with(m->words, m->nwords, &o, &b, &bs), KILN_EINVAL);
    kiln_log_set_level(KILN_LOG_WARN);
    kiln_pack_dict_destroy(dict);
    pc_free(&c);
    kiln_pack_thread_cleanup();
}

KT_CASE(raw_literals_from_16k)
{
    /* With the caller's dictionary, format 4 stores the literals of modules
     * of 16 KiB and more raw, and keeps zstd's Huffman coding below that
     * (mostly the dictionary's own table); format 3 kept it everywhere. */
    struct pc_corpus c;
    KT_REQUIRE_OK(gm_load_any_or_skip(&c, 24));
    struct kiln_pack_dict *dict;
    KT_REQUIRE_OK(train_on_eighths(&c, &dict));
    struct gen g;
    KT_REQUIRE(gen_init(&g, 8000));
    static const unsigned ops[] = {400, 1000, 3000, 8000};
    size_t raw = 0, coded = 0;
    for (size_t i = 0; i < KILN_ARRAY_LEN(ops); i++) {
        size_t n = gen_module(&g, 7 + i, ops[i]);
        void *b4, *b3;
        size_t s4, s3;
        KT_REQUIRE_OK(kiln_pack(g.head, n, KILN_CODEC_KILN, dict, &b4, &s4));
        KT_REQUIRE_OK(kiln__pack_format3(g.head, n, KILN_CODEC_KILN, dict, &b3, &s3));
        KT_CHECK_EQ(((const uint8_t *)b4)[0] & 0xE7, 0xE6); /* format 4, kiln, a dictionary */
        int t4 = literals_type(b4, s4), t3 = literals_type(b3, s3);
        KT_CHECK(t4 >= 0 && t3 >= 0);
        if (n * 4 >= 16 * 1024) {
            KT_CHECK_EQ(t4, 0);
            raw++;
        } else {
            KT_CHECK(t4 >= 2);
            coded++;
        }
        KT_CHECK(t3 >= 2);
        const uint32_t *w;
        KT_CHECK_EQ(kiln_unpack_scratch(b4, s4, dict, &w), (int64_t)n);
        KT_CHECK(memcmp(w, g.head, n * 4) == 0);
        printf("%zu words: format 4 %zu bytes (literals %d), format 3 %zu (literals %d)\n", n, s4,
               t4, s3, t3);
        kiln_pack_free(b4);
        kiln_pack_free(b3);
    }
    KT_CHECK(raw > 0 && coded > 0);
    gen_free(&g);
    kiln_pack_dict_destroy(dict);
    pc_free(&c);
    kiln_pack_thread_cleanup();
}

KT_CASE(format1_corpus_round_trip)
{
    /* The format-1 encoder, kept for tests, against today's decoder: every
     * corpus module, every codec, with and without a dictionary. */
    struct pc_corpus c;
    KT_REQUIRE_OK(pc_load(&c));
    const uint32_t *mods[64];
    size_t words[64];
    size_t nm = 0;
    for (size_t i = 0; i < c.n && nm < 64; i += c.n / 64 + 1) {
        mods[nm] = c.m[i].words;
        words[nm++] = c.m[i].nwords;
    }
    struct kiln_pack_dict *dict;
    KT_REQUIRE_OK(kiln_pack_dict_train(mods, words, nm, 16384, &dict));
    size_t bad = 0;
    for (size_t i = 0; i < c.n; i++) {
        const struct pc_module *m = &c.m[i];
        for (int v = 0; v < 4; v++) {
            enum kiln_codec codec = v < 3 ? (enum kiln_codec)v : KILN_CODEC_KILN;
            const struct kiln_pack_dict *d = v == 3 ? dict : NULL;
            void *blob;
            size_t bs;
            KT_REQUIRE_OK(kiln__pack_format1(m->words, m->nwords, codec, d, &blob, &bs));
            const uint32_t *w;
            int64_t n = kiln_unpack_scratch(blob, bs, d, &w);
            if (kiln__blob_format(blob, bs) != 1 || n != (int64_t)m->nwords ||
                memcmp(w, m->words, m->nwords * 4) != 0) {
                if (bad++ < 5)
                    kt_fail(__FILE__, __LINE__, "%s: format 1, codec %d: round trip differs",
                            m->path, v);
            }
            kiln_pack_free(blob);
        }
    }
    KT_CHECK_EQ(bad, 0);
    kiln_pack_dict_destroy(dict);
    pc_free(&c);
    kiln_pack_thread_cleanup();
}

KT_CASE(format2_smaller_than_format1)
{
    /* The point of format 2: the corpus packs smaller than with format 1,
     * without and with a dictionary (trained on the even modules, packing
     * the odd ones). */
    struct pc_corpus c;
    KT_REQUIRE_OK(pc_load(&c));
    size_t n = (c.n + 1) / 2;
    const uint32_t **mods = malloc(n * sizeof(*mods));
    size_t *words = malloc(n * sizeof(*words));
    KT_REQUIRE(mods && words);
    for (size_t i = 0; i < n; i++) {
        mods[i] = c.m[2 * i].words;
        words[i] = c.m[2 * i].nwords;
    }
    struct kiln_pack_dict *dict;
    KT_REQUIRE_OK(kiln_pack_dict_train(mods, words, n, 0, &dict));
    uint64_t total[2][2] = {{0, 0}, {0, 0}}; /* [format - 1][dict] */
    for (size_t i = 1; i < c.n; i += 2) {
        for (int f = 0; f < 2; f++) {
            for (int d = 0; d < 2; d++) {
                void *blob;
                size_t bs;
                const struct kiln_pack_dict *pd = d ? dict : NULL;
                KT_REQUIRE_OK(f == 0 ? kiln__pack_format1(c.m[i].words, c.m[i].nwords,
                                                          KILN_CODEC_KILN, pd, &blob, &bs)
                                     : kiln_pack(c.m[i].words, c.m[i].nwords, KILN_CODEC_KILN, pd,
                                                 &blob, &bs));
                total[f][d] += bs;
                kiln_pack_free(blob);
            }
        }
    }
    printf("odd corpus modules: format 1 %" PRIu64 " / %" PRIu64 " B, format 2 %" PRIu64
           " / %" PRIu64 " B (without / with a dictionary)\n",
           total[0][0], total[0][1], total[1][0], total[1][1]);
    KT_CHECK(total[1][0] * 100 < total[0][0] * 95);
    KT_CHECK(total[1][1] * 100 < total[0][1] * 90);
    free(mods);
    free(words);
    kiln_pack_dict_destroy(dict);
    pc_free(&c);
    kiln_pack_thread_cleanup();
}

KT_CASE(generated_round_trip)
{
    /* Emulator-like generated modules of many sizes, with and without a
     * dictionary, round trip byte for byte and pack smaller than format 1. */
    enum { NMOD = 40 };
    uint32_t *mods[NMOD];
    size_t words[NMOD];
    struct gen g;
    KT_REQUIRE(gen_init(&g, 6000));
    for (int i = 0; i < NMOD; i++) {
        unsigned ops = 20 + (unsigned)(i * 997 % 6000);
        words[i] = gen_module(&g, 1000 + (uint64_t)i, ops);
        mods[i] = malloc(words[i] * 4);
        KT_REQUIRE(mods[i] != NULL);
        memcpy(mods[i], g.head, words[i] * 4);
    }
    struct kiln_pack_dict *dict;
    KT_REQUIRE_OK(
        kiln_pack_dict_train((const uint32_t *const *)mods, words, NMOD / 2, 16384, &dict));
    uint64_t v1 = 0, v2 = 0;
    for (int i = 0; i < NMOD; i++) {
        for (int d = 0; d < 2; d++) {
            const struct kiln_pack_dict *pd = d ? dict : NULL;
            void *blob, *old;
            size_t bs, os;
            KT_REQUIRE_OK(kiln_pack(mods[i], words[i], KILN_CODEC_KILN, pd, &blob, &bs));
            KT_REQUIRE_OK(kiln__pack_format1(mods[i], words[i], KILN_CODEC_KILN, pd, &old, &os));
            enum kiln_codec codec;
            KT_CHECK_OK(kiln_blob_info(blob, bs, &codec, NULL));
            KT_CHECK_EQ(codec, KILN_CODEC_KILN);
            const uint32_t *w;
            KT_CHECK_EQ(kiln_unpack_scratch(blob, bs, pd, &w), (int64_t)words[i]);
            KT_CHECK(memcmp(w, mods[i], words[i] * 4) == 0);
            if (d == 0) {
                v1 += os;
                v2 += bs;
            }
            kiln_pack_free(blob);
            kiln_pack_free(old);
        }
    }
    KT_CHECK(v2 < v1);
    for (int i = 0; i < NMOD; i++)
        free(mods[i]);
    kiln_pack_dict_destroy(dict);
    gen_free(&g);
    kiln_pack_thread_cleanup();
}

KT_CASE(damage_refused)
{
    /* Every truncation of a format-4, -3 or -2 blob is refused, and random
     * bit flips give a clean error or the exact module, for every codec,
     * with and without a dictionary, for a generated and a corpus module.
     * Format 4's and 3's flipped blobs are also resealed, so that the decoders
     * behind the seal get damaged bytes: a clean error or the stated size. */
    struct gen g;
    KT_REQUIRE(gen_init(&g, 800));
    size_t gn = gen_module(&g, 99, 800);
    struct pc_corpus c;
    /* The shared corpus, or on a bare clone modules of kiln's generator. */
    KT_REQUIRE_OK(gm_load_any_or_skip(&c, 24));
    const struct pc_module *cm = &c.m[c.n / 3];
    struct kiln_pack_dict *dict;
    KT_REQUIRE_OK(train_on_eighths(&c, &dict));
    size_t cap = KILN_MAX(gn, cm->nwords);
    uint32_t *out = malloc(cap * 4);
    KT_REQUIRE(out != NULL);
    kiln_log_set_level(KILN_LOG_ERROR);
    uint64_t rng = 5;
    for (int src = 0; src < 2; src++) {
        const uint32_t *m = src ? cm->words : g.head;
        size_t mn = src ? cm->nwords : gn;
        for (int fv = 0; fv < 12; fv++) {
            int f = 4 - fv / 4, v = fv % 4;
            enum kiln_codec codec = v < 3 ? (enum kiln_codec)v : KILN_CODEC_KILN;
            const struct kiln_pack_dict *d = v == 3 ? dict : NULL;
            void *blob;
            size_t bs;
            KT_REQUIRE_OK(pack_in(f, m, mn, codec, d, &blob, &bs));
            for (size_t cut = 0; cut < bs; cut++)
                KT_CHECK(kiln_unpack(blob, cut, d, out, cap) < 0);
            uint8_t *b = blob;
            uint8_t *copy = malloc(bs);
            KT_REQUIRE(copy != NULL);
            for (int k = 0; k < 3000; k++) {
                size_t bit = kt_rand(&rng) % (bs * 8);
                b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                KT_CHECK(error_or_exact(blob, bs, d, m, mn, out, cap));
                memcpy(copy, b, bs);
                if (f >= 3 && kiln__blob_reseal(copy, bs, kiln_pack_dict_id(dict)) == 0) {
                    size_t want = 0;
                    int64_t r = kiln_unpack(copy, bs, d, out, cap);
                    KT_CHECK_OK(kiln_blob_info(copy, bs, NULL, &want));
                    KT_CHECK(r == KILN_ECORRUPT_BLOB || r == KILN_EINVAL || r == KILN_ERANGE ||
                             (size_t)r * 4 == want);
                }
                b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            }
            free(copy);
            KT_CHECK_EQ(kiln_unpack(blob, bs, d, out, cap), (int64_t)mn);
            kiln_pack_free(blob);
        }
    }
    kiln_log_set_level(KILN_LOG_WARN);
    free(out);
    kiln_pack_dict_destroy(dict);
    pc_free(&c);
    gen_free(&g);
    kiln_pack_thread_cleanup();
}

KT_CASE(strings_every_length)
{
    /* Literal strings of every length up to 23 bytes, ASCII and with bytes
     * of 0x80 and over, in each instruction that decodes strings its own way
     * (OpSourceExtension, OpName, OpMemberName, OpString), last in the raw
     * stream or followed by another: each round-trips exactly, and the
     * transformed streams cut anywhere are refused. */
    static const uint32_t ops[] = {4, 5, 6, 7};
    uint32_t words[64], out[64];
    uint8_t *x = malloc(kiln__spirv2_work_bound(64));
    uint8_t *scratch = malloc(kiln__spirv2_decode_scratch(64));
    KT_REQUIRE(x != NULL && scratch != NULL);
    for (unsigned k = 0; k < 4; k++) {
        for (uint32_t len = 0; len < 24; len++) {
            for (unsigned variant = 0; variant < 4; variant++) {
                size_t n = 0;
                const uint32_t head[5] = {0x07230203u, 0x00010300u, 0, 100, 0};
                memcpy(words, head, sizeof(head));
                n = 5;
                for (unsigned rep = 0; rep < 1 + (variant >> 1); rep++) {
                    uint32_t pre = ops[k] == 4 ? 0 : ops[k] == 6 ? 2 : 1;
                    uint32_t sw = len / 4 + 1, wc = 1 + pre + sw;
                    words[n] = wc << 16 | ops[k];
                    for (uint32_t i = 1; i <= pre; i++)
                        words[n + i] = 3 + rep + i;
                    uint8_t *b = (uint8_t *)&words[n + 1 + pre];
                    memset(b, 0, sw * 4);
                    for (uint32_t i = 0; i < len; i++)
                        b[i] = (uint8_t)(variant & 1 ? 0x80 + (i * 37 + len) % 0x7F : 'a' + i % 26);
                    n += wc;
                }
                void *blob;
                size_t bs;
                KT_REQUIRE_OK(kiln_pack(words, n, KILN_CODEC_KILN, NULL, &blob, &bs));
                memset(out, 0xAB, sizeof(out));
                KT_CHECK_EQ(kiln_unpack(blob, bs, NULL, out, 64), (int64_t)n);
                KT_CHECK(memcmp(out, words, n * 4) == 0);
                kiln_pack_free(blob);
                int64_t xn = kiln__spirv2_encode(words, n, x, kiln__spirv2_work_bound(64), -1);
                KT_REQUIRE(xn > 0);
                KT_CHECK_OK(kiln__spirv2_decode(x, (size_t)xn, out, n, scratch));
                KT_CHECK(memcmp(out, words, n * 4) == 0);
                for (int64_t cut = 0; cut < xn; cut++)
                    KT_CHECK_EQ(kiln__spirv2_decode(x, (size_t)cut, out, n, scratch),
                                KILN_ECORRUPT_BLOB);
            }
        }
    }
    free(x);
    free(scratch);
    kiln_pack_thread_cleanup();
}

KT_MAIN(KT_ENTRY(format_header), KT_ENTRY(v1_fixtures_unpack), KT_ENTRY(v2_fixtures_unpack),
        KT_ENTRY(v3_fixtures_unpack), KT_ENTRY(builtin_dictionary), KT_ENTRY(builtin_never_larger),
        KT_ENTRY(level_max), KT_ENTRY(raw_literals_from_16k), KT_ENTRY(format1_corpus_round_trip),
        KT_ENTRY(format2_smaller_than_format1), KT_ENTRY(generated_round_trip),
        KT_ENTRY(damage_refused), KT_ENTRY(strings_every_length))

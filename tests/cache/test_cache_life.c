/*
 * test_cache_life.c - the cache's life cycle: the dictionary file, last-use
 * marks, compact, prune, repack and merge.
 *
 * Programs are real SPIR-V modules of the shared corpus (a spread of them,
 * to keep the cases short), or, where there is none (a bare clone), made
 * by kiln's generator (tests/support/gen_modules.c), stored as program payloads the way the
 * preparation stores them. Every case checks what comes back byte for byte
 * against the modules it stored; ages are made with the options' `today`.
 */
#include "kiln_test.h"
#include "faultio.h"
#include "gen_modules.h"
#include "kiln_internal.h"

#include <stdio.h>

#define NPROG 96
/* Generated programs whose stages are the modules (48 modules). */
#define GEN_PROGRAMS 32

static struct pc_corpus corpus;
static bool corpus_ok;

static void corpus_free(void)
{
    pc_free(&corpus);
}

/* Module i of the spread used by these tests. */
static const struct pc_module *mod(size_t i)
{
    if (!corpus_ok) {
        if (gm_load_any(&corpus, GEN_PROGRAMS) < 0)
            return NULL;
        corpus_ok = true;
        atexit(corpus_free);
    }
    size_t step = corpus.n / (NPROG * 2);
    return &corpus.m[(i * (step ? step : 1)) % corpus.n];
}

/* Program p: one stage (module p), every fourth one two stages (p, p+NPROG). */
static unsigned prog_stages(size_t p)
{
    return p % 4 == 3 ? 2 : 1;
}

static struct kiln_key prog_key(size_t p)
{
    uint64_t v[2] = {0x6c696665, p};
    return kiln_hash128(v, sizeof(v));
}

/* Builds program p's payload with `codec` (no dictionary). */
static int prog_payload(size_t p, enum kiln_codec codec, void **out, size_t *size, uint32_t *raw)
{
    struct kiln_stage_blob st[2];
    void *blobs[2] = {NULL, NULL};
    unsigned n = prog_stages(p);
    *raw = 0;
    int rc = KILN_OK;
    for (unsigned s = 0; s < n && rc == KILN_OK; s++) {
        const struct pc_module *m = mod(p + s * NPROG);
        if (!m)
            return KILN_ENOENT;
        size_t bs;
        rc = kiln_pack(m->words, m->nwords, codec, NULL, &blobs[s], &bs);
        st[s] = (struct kiln_stage_blob){.stage = s, .blob = blobs[s], .blob_size = bs};
        *raw += (uint32_t)(m->nwords * 4);
    }
    if (rc == KILN_OK)
        rc = kiln_program_payload_build(st, n, out, size);
    kiln_pack_free(blobs[0]);
    kiln_pack_free(blobs[1]);
    return rc;
}

static int put_prog(struct kiln_cache *c, size_t p, enum kiln_codec codec)
{
    void *pl;
    size_t size;
    uint32_t raw;
    KILN_TRY(prog_payload(p, codec, &pl, &size, &raw));
    int rc =
        kiln_cache_put(c, prog_key(p), pl, size, raw, (uint8_t)codec, (uint16_t)prog_stages(p));
    kiln_pack_free(pl);
    return rc;
}

static struct kiln_cache *open_cache(const char *dir, unsigned flags, uint32_t today,
                                     const struct kiln_io *io)
{
    struct kiln_cache_options o = {
        .size = sizeof(o), .stamp = 77, .flags = flags, .today = today, .io = io};
    struct kiln_cache *c = NULL;
    int rc = kiln_cache_open(dir, &o, &c);
    return rc < 0 ? NULL : c;
}

/* Loads every program in `ps` (n of them) and checks each stage unpacks to
 * its module byte for byte (with `codec` as every blob's codec when not
 * negative). @return the number of programs that matched. */
static size_t check_progs(struct kiln_cache *c, const size_t *ps, size_t n, int codec)
{
    struct kiln_key *keys = malloc(n * sizeof(*keys));
    for (size_t i = 0; i < n; i++)
        keys[i] = prog_key(ps[i]);
    struct kiln_cache_result *res = NULL;
    int64_t got = kiln_cache_load_many(c, keys, n, 2, &res);
    size_t ok = 0;
    for (size_t i = 0; got >= 0 && i < n; i++) {
        if (res[i].status != KILN_OK)
            continue;
        struct kiln_stage_blob st[4];
        int ns = kiln_program_payload_parse(res[i].data, res[i].size, 4, st);
        bool good = ns == (int)prog_stages(ps[i]);
        for (int s = 0; good && s < ns; s++) {
            const struct pc_module *m = mod(ps[i] + (size_t)s * NPROG);
            enum kiln_codec bc;
            if (kiln_blob_info(st[s].blob, st[s].blob_size, &bc, NULL) < 0 ||
                (codec >= 0 && (int)bc != codec && m->nwords >= 5)) {
                good = false;
                break;
            }
            const uint32_t *w;
            int64_t nw = kiln_unpack_scratch(st[s].blob, st[s].blob_size, kiln_cache_dict(c), &w);
            good = nw == (int64_t)m->nwords && memcmp(w, m->words, m->nwords * 4) == 0;
        }
        ok += good;
    }
    kiln_cache_results_free(res, n);
    free(keys);
    return ok;
}

static size_t all[NPROG];

/* check_progs through a read-only handle of its own, so that the loads
 * leave the writer's last-use marks alone. */
static size_t check_dir(const char *dir, const size_t *ps, size_t n, uint32_t today)
{
    struct kiln_cache_options o = {.size = sizeof(o),
                                   .stamp = 77,
                                   .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT,
                                   .today = today};
    struct kiln_cache *c;
    if (kiln_cache_open(dir, &o, &c) < 0)
        return 0;
    size_t ok = check_progs(c, ps, n, -1);
    kiln_cache_close(c);
    return ok;
}

/* Every case's programs: ends the case as skipped (exit 77) where there
 * are no modules to make them of (no ../shared corpus and no shaderc, as
 * in the Windows build). */
static void fill_all(void)
{
    if (!mod(0)) {
        printf("skipped: no SPIR-V modules here (no ../shared corpus, no shaderc)\n");
        exit(77);
    }
    for (size_t i = 0; i < NPROG; i++)
        all[i] = i;
}

/* A cache of NPROG programs packed with `codec`, synced and closed. */
static bool make_cache(const char *dir, enum kiln_codec codec, uint32_t today)
{
    struct kiln_cache *c = open_cache(dir, KILN_CACHE_CREATE, today, NULL);
    if (!c)
        return false;
    bool ok = true;
    for (size_t p = 0; p < NPROG && ok; p++)
        ok = put_prog(c, p, codec) == KILN_OK;
    ok = ok && kiln_cache_sync(c) == KILN_OK;
    kiln_cache_close(c);
    return ok;
}

static void path_of(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* @return a file's bytes (free()), or NULL. */
static unsigned char *read_file_all(const char *path, size_t *n)
{
    void *data = NULL;
    return kiln_io_read_file(kiln_io_default(), path, (size_t)64 << 20, &data, n) == KILN_OK ? data
                                                                                             : NULL;
}

/* A cache of NPROG raw programs in `dir`, repacked with the kiln codec and
 * a dictionary trained from them (*r: the repack's report). @return it,
 * open for writing, or NULL with a failure recorded. */
static struct kiln_cache *trained_cache(const char *dir, struct kiln_cache_rewrite_report *r)
{
    struct kiln_cache *c = NULL;
    if (!make_cache(dir, KILN_CODEC_RAW, 100) ||
        !(c = open_cache(dir, KILN_CACHE_KEEP_STAMP, 100, NULL))) {
        kt_fail(__FILE__, __LINE__, "cannot make a cache in %s", dir);
        return NULL;
    }
    int rc = kiln_cache_repack(c, KILN_CODEC_KILN, KILN_CACHE_DICT_TRAIN, r);
    if (rc != KILN_OK) {
        kt_fail(__FILE__, __LINE__, "repack with a trained dictionary: %s", kiln_errname(rc));
        kiln_cache_close(c);
        return NULL;
    }
    return c;
}

KT_CASE(dict_round_trip)
{
    fill_all();
    const char *dir = kt_tmpdir();
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    struct kiln_cache *c = trained_cache(dir, &r);
    KT_REQUIRE(c);
    KT_CHECK(r.rewritten);
    KT_CHECK_EQ(r.repacked, NPROG);
    KT_CHECK(r.dict_id_after != 0);
    KT_CHECK(kiln_pack_dict_id(kiln_cache_dict(c)) == r.dict_id_after);
    KT_CHECK(r.payload_bytes_after < r.payload_bytes_before);
    KT_CHECK_EQ(check_progs(c, all, NPROG, KILN_CODEC_KILN), NPROG);
    kiln_cache_close(c);

    /* Reopen with the dictionary the cache has: every record exact. */
    c = open_cache(dir, KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT, 100, NULL);
    KT_REQUIRE(c);
    KT_CHECK(kiln_cache_dict(c) != NULL);
    KT_CHECK_EQ(check_progs(c, all, NPROG, KILN_CODEC_KILN), NPROG);
    kiln_cache_close(c);
    /* A caller that names no dictionary opens with the cache's own, with or
     * without KILN_CACHE_USE_DICT, reader or writer (issue 13). */
    for (int writer = 0; writer < 2; writer++) {
        struct kiln_cache_options plain = {
            .size = sizeof(plain), .stamp = 77, .flags = writer ? 0u : KILN_CACHE_READ_ONLY};
        KT_REQUIRE_OK(kiln_cache_open(dir, &plain, &c));
        KT_CHECK(kiln_cache_dict(c) != NULL);
        KT_CHECK_EQ(kiln_cache_count(c), NPROG);
        KT_CHECK_EQ(check_progs(c, all, NPROG, KILN_CODEC_KILN), NPROG);
        kiln_cache_close(c);
    }
    /* One that names another dictionary is refused, the cache untouched. */
    struct kiln_cache_options other_id = {
        .size = sizeof(other_id), .stamp = 77, .dict_id = 12345, .flags = KILN_CACHE_CREATE};
    KT_CHECK_EQ(kiln_cache_open(dir, &other_id, &c), KILN_ESTAMP);

    /* Another dictionary in programs.kpd: detected, never a wrong unpack. */
    const uint32_t *mods[40];
    size_t words[40];
    for (size_t i = 0; i < 40; i++) {
        const struct pc_module *m = &corpus.m[corpus.n - 1 - i];
        mods[i] = m->words;
        words[i] = m->nwords;
    }
    struct kiln_pack_dict *other = NULL;
    KT_REQUIRE_OK(kiln_pack_dict_train(mods, words, 40, 0, &other));
    char kpd[4200], kpd_save[4200];
    path_of(kpd, sizeof(kpd), dir, KILN_CACHE_DICT_FILE);
    path_of(kpd_save, sizeof(kpd_save), dir, "saved.kpd");
    KT_REQUIRE(rename(kpd, kpd_save) == 0);
    size_t on;
    const void *ob = kiln_pack_dict_bytes(other, &on);
    KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), kpd, ob, on));
    struct kiln_cache_options ro = {
        .size = sizeof(ro), .stamp = 77, .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT};
    /* One copy holds another dictionary: the second copy serves (issue 17,
     * point 3); check reports it and --repair restores it. */
    KT_REQUIRE_OK(kiln_cache_open(dir, &ro, &c));
    KT_CHECK(kiln_cache_dict(c) != NULL);
    KT_CHECK_EQ(check_progs(c, all, NPROG, KILN_CODEC_KILN), NPROG);
    kiln_cache_close(c);
    struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
    KT_CHECK_EQ(kiln_cache_check(dir, NULL, false, &rep), KILN_ECORRUPT);
    KT_CHECK_EQ(rep.dict_copies, 1);
    KT_CHECK(strstr(rep.dict_text, "programs.kpd holds dictionary") != NULL);
    KT_CHECK_OK(kiln_cache_check(dir, NULL, true, &rep));
    KT_CHECK(rep.repaired);
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
    KT_CHECK(rep.whole);
    KT_CHECK_EQ(rep.dict_copies, 2);
    /* Damaged bytes in one copy: a writer's open restores it. */
    char kpd2[4200];
    path_of(kpd2, sizeof(kpd2), dir, KILN_CACHE_DICT_COPY_FILE);
    size_t rn;
    unsigned char *right = read_file_all(kpd2, &rn);
    KT_REQUIRE(right);
    right[rn / 2] ^= 0x10;
    KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), kpd2, right, rn));
    right[rn / 2] ^= 0x10;
    c = open_cache(dir, KILN_CACHE_KEEP_STAMP, 100, NULL);
    KT_REQUIRE(c);
    KT_CHECK_EQ(check_progs(c, all, NPROG, KILN_CODEC_KILN), NPROG);
    kiln_cache_close(c);
    size_t n2;
    unsigned char *again = read_file_all(kpd2, &n2);
    KT_CHECK(again && n2 == rn && memcmp(again, right, rn) == 0);
    free(again);
    free(right);

    /* Both copies of another dictionary: detected, never a wrong unpack,
     * and the records are kept whatever opens it. */
    KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), kpd, ob, on));
    KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), kpd2, ob, on));
    KT_CHECK_EQ(kiln_cache_open(dir, &ro, &c), KILN_ECORRUPT);
    struct kiln_cache_options keep = {.size = sizeof(keep), .flags = KILN_CACHE_KEEP_STAMP};
    KT_CHECK_EQ(kiln_cache_open(dir, &keep, &c), KILN_ECORRUPT);
    KT_CHECK_EQ(kiln_cache_check(dir, NULL, true, &rep), KILN_ECORRUPT);
    KT_CHECK_EQ(rep.dict_copies, 0);
    KT_CHECK(strstr(rep.dict_text, "cannot be unpacked") != NULL);
    KT_CHECK_EQ(rep.records, NPROG);
    struct kiln_cache_options any = {.size = sizeof(any),
                                     .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    KT_REQUIRE_OK(kiln_cache_open(dir, &any, &c));
    KT_CHECK_EQ(kiln_cache_count(c), NPROG);
    /* A blob unpacked with the wrong dictionary is refused. */
    struct kiln_key k0 = prog_key(0);
    struct kiln_cache_result *res;
    KT_REQUIRE(kiln_cache_load_many(c, &k0, 1, 1, &res) == 1);
    struct kiln_stage_blob st[2];
    KT_REQUIRE(kiln_program_payload_parse(res[0].data, res[0].size, 2, st) == 1);
    const uint32_t *w;
    KT_CHECK_EQ(kiln_unpack_scratch(st[0].blob, st[0].blob_size, other, &w), KILN_EINVAL);
    kiln_cache_results_free(res, 1);
    kiln_cache_close(c);

    /* A damaged programs.kpd: detected too. */
    unsigned char *bad = malloc(on);
    memcpy(bad, ob, on);
    bad[on / 2] ^= 0x40;
    KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), kpd, bad, on));
    free(bad);
    KT_CHECK_EQ(kiln_cache_open(dir, &ro, &c), KILN_ECORRUPT);

    /* A switch cut short after its commit point: the right dictionary is
     * pending as programs.kpd.new; a writer open finishes the switch. */
    char kpd_new[4300];
    snprintf(kpd_new, sizeof(kpd_new), "%s.new", kpd);
    KT_REQUIRE(rename(kpd_save, kpd_new) == 0);
    c = open_cache(dir, KILN_CACHE_KEEP_STAMP, 100, NULL);
    KT_REQUIRE(c);
    KT_CHECK_EQ(check_progs(c, all, NPROG, KILN_CODEC_KILN), NPROG);
    kiln_cache_close(c);
    FILE *f = fopen(kpd_new, "rb");
    KT_CHECK(f == NULL);
    if (f)
        fclose(f);
    c = open_cache(dir, KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT, 100, NULL);
    KT_CHECK(c != NULL);
    kiln_cache_close(c);
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
    KT_CHECK(rep.whole);
    KT_CHECK_EQ(rep.dict_copies, 2);
    kiln_pack_dict_destroy(other);
}

/* One dictionary copy lost, missing or empty (issue 29, point 7): the same
 * verdict either way, since nothing in either disagrees with the whole copy
 * and a repair writes both back. The cache stays whole, check names the
 * lost copy, and --repair restores it. */
KT_CASE(dict_copy_lost)
{
    fill_all();
    const char *dir = kt_tmpdir();
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    struct kiln_cache *c = trained_cache(dir, &r);
    KT_REQUIRE(c);
    kiln_cache_close(c);
    static const char *const names[] = {KILN_CACHE_DICT_FILE, KILN_CACHE_DICT_COPY_FILE};
    for (size_t i = 0; i < 2; i++) {
        for (int empty = 0; empty < 2; empty++) {
            char p[4200];
            path_of(p, sizeof(p), dir, names[i]);
            if (empty)
                KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), p, "", 0));
            else
                KT_REQUIRE(remove(p) == 0);
            struct kiln_cache_check_report rep = KILN_CACHE_CHECK_REPORT_INIT;
            KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
            KT_CHECK(rep.whole);
            KT_CHECK_EQ(rep.dict_copies, 1);
            KT_CHECK(strstr(rep.dict_text, names[i]) != NULL);
            KT_CHECK(strstr(rep.dict_text, empty ? "is empty" : "is missing") != NULL);
            c = open_cache(dir, KILN_CACHE_READ_ONLY, 100, NULL);
            KT_REQUIRE(c);
            KT_CHECK_EQ(check_progs(c, all, NPROG, KILN_CODEC_KILN), NPROG);
            kiln_cache_close(c);
            KT_CHECK_OK(kiln_cache_check(dir, NULL, true, &rep));
            KT_CHECK(rep.repaired);
            KT_CHECK_EQ(rep.dict_copies, 2);
            KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &rep));
            KT_CHECK(rep.whole && rep.dict_copies == 2);
        }
    }
}

KT_CASE(repack_chain)
{
    fill_all();
    const char *dir = kt_tmpdir();
    KT_REQUIRE(make_cache(dir, KILN_CODEC_RAW, 100));
    /* One record that is not a program: copied as it is. */
    struct kiln_cache *c = open_cache(dir, 0, 100, NULL);
    KT_REQUIRE(c);
    static const char junk[] = "not a program payload";
    struct kiln_key jk = {1, 2};
    KT_REQUIRE_OK(kiln_cache_put(c, jk, junk, sizeof(junk), sizeof(junk), 0, 1));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    static const struct {
        enum kiln_codec codec;
        enum kiln_cache_dict_mode mode;
    } steps[] = {{KILN_CODEC_KILN, KILN_CACHE_DICT_NONE},
                 {KILN_CODEC_KILN, KILN_CACHE_DICT_TRAIN},
                 {KILN_CODEC_ZSTD, KILN_CACHE_DICT_KEEP},
                 {KILN_CODEC_RAW, KILN_CACHE_DICT_NONE}};
    uint64_t first_bytes = 0;
    for (size_t i = 0; i < KILN_ARRAY_LEN(steps); i++) {
        c = open_cache(dir, KILN_CACHE_KEEP_STAMP, 100, NULL);
        KT_REQUIRE(c);
        struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
        KT_REQUIRE_OK(kiln_cache_repack(c, steps[i].codec, steps[i].mode, &r));
        KT_CHECK_EQ(r.repacked, NPROG);
        KT_CHECK_EQ(r.kept_as_is, 1);
        KT_CHECK_EQ(r.records_after, NPROG + 1);
        if (i == 0)
            first_bytes = r.payload_bytes_before;
        kiln_cache_close(c);
        c = open_cache(dir, KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT, 100, NULL);
        KT_REQUIRE(c);
        struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
        kiln_cache_get_stats(c, &st);
        KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_INDEX);
        KT_CHECK_EQ(st.dict_id != 0, steps[i].mode == KILN_CACHE_DICT_TRAIN);
        KT_CHECK_EQ(check_progs(c, all, NPROG, (int)steps[i].codec), NPROG);
        struct kiln_cache_result *res;
        KT_REQUIRE(kiln_cache_load_many(c, &jk, 1, 1, &res) == 1);
        KT_CHECK(res[0].size == sizeof(junk) && memcmp(res[0].data, junk, sizeof(junk)) == 0);
        kiln_cache_results_free(res, 1);
        if (i == KILN_ARRAY_LEN(steps) - 1)
            KT_CHECK_EQ(st.bytes, first_bytes); /* raw again: the same bytes */
        kiln_cache_close(c);
    }
    /* A dictionary only with the kiln codec. */
    c = open_cache(dir, KILN_CACHE_KEEP_STAMP, 100, NULL);
    KT_REQUIRE(c);
    KT_CHECK_EQ(kiln_cache_repack(c, KILN_CODEC_ZSTD, KILN_CACHE_DICT_TRAIN, NULL), KILN_EINVAL);
    kiln_cache_close(c);
}

KT_CASE(compact_round_trip)
{
    fill_all();
    const char *dir = kt_tmpdir();
    KT_REQUIRE(make_cache(dir, KILN_CODEC_ZSTD, 100));
    struct kiln_cache *c = open_cache(dir, 0, 100, NULL);
    KT_REQUIRE(c);
    /* Supersede a third of the programs (same content, another codec). */
    for (size_t p = 0; p < NPROG; p += 3)
        KT_REQUIRE_OK(put_prog(c, p, KILN_CODEC_KILN));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    struct kiln_cache_stats before = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &before);
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_REQUIRE_OK(kiln_cache_compact(c, &r));
    KT_CHECK(r.rewritten);
    KT_CHECK_EQ(r.superseded, NPROG / 3);
    KT_CHECK_EQ(r.records_after, NPROG);
    KT_CHECK(r.file_bytes_after < r.file_bytes_before);
    KT_CHECK_EQ(r.payload_bytes_after, before.bytes);
    struct kiln_cache_entry *es;
    size_t n;
    KT_REQUIRE_OK(kiln_cache_entries(c, &es, &n));
    uint64_t want = 64;
    for (size_t i = 0; i < n; i++)
        want += 48 + ((es[i].size + 7u) & ~7u);
    kiln_cache_entries_free(es);
    KT_CHECK_EQ(r.file_bytes_after, want);
    KT_CHECK_EQ(check_progs(c, all, NPROG, -1), NPROG);
    /* The handle goes on: a put after the rewrite, and a second compact
     * has nothing to do. */
    KT_REQUIRE_OK(put_prog(c, 5, KILN_CODEC_RAW));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    KT_REQUIRE_OK(kiln_cache_compact(c, &r));
    KT_CHECK(r.rewritten);
    KT_REQUIRE_OK(kiln_cache_compact(c, &r));
    KT_CHECK(!r.rewritten);
    kiln_cache_close(c);
    c = open_cache(dir, KILN_CACHE_READ_ONLY, 100, NULL);
    KT_REQUIRE(c);
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    KT_CHECK_EQ(st.open_kind, KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(st.superseded, 0);
    KT_CHECK_EQ(check_progs(c, all, NPROG, -1), NPROG);
    kiln_cache_close(c);
    struct kiln_cache_check_report cr = KILN_CACHE_CHECK_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &cr));
    KT_CHECK(cr.whole);
}

/* Loads programs [from, to) so that they are marked used today. */
static void use_range(struct kiln_cache *c, size_t from, size_t to)
{
    struct kiln_key keys[NPROG];
    for (size_t p = from; p < to; p++)
        keys[p - from] = prog_key(p);
    struct kiln_cache_result *res;
    int64_t got = kiln_cache_load_many(c, keys, to - from, 1, &res);
    if (got >= 0)
        kiln_cache_results_free(res, to - from);
}

KT_CASE(last_use_and_prune)
{
    fill_all();
    const char *dir = kt_tmpdir();
    KT_REQUIRE(make_cache(dir, KILN_CODEC_KILN, 1000));
    /* Day 1010: programs 0..31 used; day 1020: programs 32..63 used. Loads
     * make no write: counted through a fault table that never faults. */
    struct faultio f;
    faultio_init(&f);
    struct kiln_cache *c = open_cache(dir, 0, 1010, &f.io);
    KT_REQUIRE(c);
    faultio_arm(&f, UINT64_MAX, FAULTIO_ANY_WRITE, KILN_EIO, false);
    use_range(c, 0, 32);
    KT_CHECK_EQ(f.calls, 0);
    faultio_disarm(&f);
    kiln_cache_close(c); /* writes programs.kpu */
    faultio_destroy(&f);
    c = open_cache(dir, 0, 1020, NULL);
    KT_REQUIRE(c);
    use_range(c, 32, 64);
    KT_REQUIRE_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    c = open_cache(dir, 0, 1030, NULL);
    KT_REQUIRE(c);
    uint32_t day = 0;
    KT_CHECK_OK(kiln_cache_last_use(c, prog_key(3), &day));
    KT_CHECK_EQ(day, 1010);
    KT_CHECK_OK(kiln_cache_last_use(c, prog_key(40), &day));
    KT_CHECK_EQ(day, 1020);
    KT_CHECK_OK(kiln_cache_last_use(c, prog_key(80), &day));
    KT_CHECK_EQ(day, 1000);

    /* Older than 25 days (before day 1005): programs 64..95 go. */
    struct kiln_cache_prune_options po = {
        .size = sizeof(po), .older_than_days = 25, .max_file_bytes = 0};
    struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_REQUIRE_OK(kiln_cache_prune(c, &po, &r));
    KT_CHECK_EQ(r.dropped, 32);
    KT_CHECK_EQ(r.records_after, 64);
    KT_CHECK_EQ(check_dir(dir, all, 64, 1030), 64);
    KT_CHECK_EQ(kiln_cache_find(c, prog_key(70), NULL), KILN_ENOTFOUND);
    /* Marks survive the rewrite. */
    KT_CHECK_OK(kiln_cache_last_use(c, prog_key(40), &day));
    KT_CHECK_EQ(day, 1020);

    /* By size: the least recently used (0..31, day 1010) go first. */
    struct kiln_cache_entry *es;
    size_t n;
    KT_REQUIRE_OK(kiln_cache_entries(c, &es, &n));
    uint64_t newer = 64;
    for (size_t i = 0; i < n; i++)
        for (size_t p = 32; p < 64; p++)
            if (kiln_key_equal(es[i].key, prog_key(p)))
                newer += 48 + ((es[i].size + 7u) & ~7u);
    kiln_cache_entries_free(es);
    po = (struct kiln_cache_prune_options){.size = sizeof(struct kiln_cache_prune_options),
                                           .older_than_days = UINT32_MAX,
                                           .max_file_bytes = newer};
    KT_REQUIRE_OK(kiln_cache_prune(c, &po, &r));
    KT_CHECK_EQ(r.dropped, 32);
    KT_CHECK(r.file_bytes_after <= newer);
    KT_CHECK_EQ(r.file_bytes_after, newer);
    KT_CHECK_EQ(check_dir(dir, all + 32, 32, 1030), 32);
    for (size_t p = 0; p < 32; p++)
        KT_CHECK_EQ(kiln_cache_find(c, prog_key(p), NULL), KILN_ENOTFOUND);
    /* Limits that hold already: nothing to do. */
    KT_REQUIRE_OK(kiln_cache_prune(c, &po, &r));
    KT_CHECK(!r.rewritten);
    kiln_cache_close(c);
    c = open_cache(dir, KILN_CACHE_READ_ONLY, 1030, NULL);
    KT_REQUIRE(c);
    KT_CHECK_EQ(kiln_cache_count(c), 32);
    KT_CHECK_OK(kiln_cache_last_use(c, prog_key(50), &day));
    KT_CHECK_EQ(day, 1020);
    kiln_cache_close(c);
}

KT_CASE(merge_round_trip)
{
    fill_all();
    char a[4200], b[4200], out[4200], odd[4200];
    const char *dir = kt_tmpdir();
    path_of(a, sizeof(a), dir, "a");
    path_of(b, sizeof(b), dir, "b");
    path_of(out, sizeof(out), dir, "out");
    path_of(odd, sizeof(odd), dir, "odd");
    KT_REQUIRE(kt_mkdir(a) == 0 && kt_mkdir(b) == 0 && kt_mkdir(out) == 0 && kt_mkdir(odd) == 0);
    /* a: programs 0..63 (zstd); b: 32..95 (kiln): b is newer for 32..63. */
    struct kiln_cache *c = open_cache(a, KILN_CACHE_CREATE, 500, NULL);
    KT_REQUIRE(c);
    for (size_t p = 0; p < 64; p++)
        KT_REQUIRE_OK(put_prog(c, p, KILN_CODEC_ZSTD));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
    c = open_cache(b, KILN_CACHE_CREATE, 600, NULL);
    KT_REQUIRE(c);
    for (size_t p = 32; p < NPROG; p++)
        KT_REQUIRE_OK(put_prog(c, p, KILN_CODEC_KILN));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    c = open_cache(out, KILN_CACHE_CREATE, 700, NULL);
    KT_REQUIRE(c);
    const char *ins[] = {a, b};
    struct kiln_cache_merge_report r = KILN_CACHE_MERGE_REPORT_INIT;
    KT_REQUIRE_OK(kiln_cache_merge(c, ins, 2, &r));
    KT_CHECK_EQ(r.records_read, 128);
    KT_CHECK_EQ(r.added, NPROG);
    KT_CHECK_EQ(r.records_after, NPROG);
    KT_CHECK_EQ(check_dir(out, all, NPROG, 700), NPROG);
    struct kiln_cache_entry e;
    KT_REQUIRE_OK(kiln_cache_find(c, prog_key(40), &e));
    KT_CHECK_EQ(e.codec, KILN_CODEC_KILN); /* b's record won */
    KT_REQUIRE_OK(kiln_cache_find(c, prog_key(10), &e));
    KT_CHECK_EQ(e.codec, KILN_CODEC_ZSTD);
    uint32_t day;
    KT_CHECK_OK(kiln_cache_last_use(c, prog_key(10), &day));
    KT_CHECK_EQ(day, 500); /* the input's last use, not the merge's day */
    /* Merging again adds nothing. */
    KT_REQUIRE_OK(kiln_cache_merge(c, ins, 2, &r));
    KT_CHECK_EQ(r.added, 0);
    KT_CHECK_EQ(r.same, NPROG);
    /* Another stamp: refused, nothing merged. */
    struct kiln_cache_options oo = {.size = sizeof(oo), .stamp = 78, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *o2;
    KT_REQUIRE_OK(kiln_cache_open(odd, &oo, &o2));
    KT_REQUIRE_OK(put_prog(o2, 200, KILN_CODEC_RAW));
    KT_REQUIRE_OK(kiln_cache_sync(o2));
    kiln_cache_close(o2);
    const char *bad[] = {a, odd};
    KT_CHECK_EQ(kiln_cache_merge(c, bad, 2, &r), KILN_ESTAMP);
    KT_CHECK_EQ(r.added, 0);
    KT_CHECK_EQ(kiln_cache_count(c), NPROG);
    kiln_cache_close(c);
    c = open_cache(out, KILN_CACHE_READ_ONLY, 700, NULL);
    KT_REQUIRE(c);
    KT_CHECK_EQ(check_progs(c, all, NPROG, -1), NPROG);
    kiln_cache_close(c);
}

/* Every program and the junk record, checked after a failed rewrite. */
static bool old_cache_whole(const char *dir, int codec)
{
    struct kiln_cache *c = open_cache(dir, KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT, 100, NULL);
    if (!c)
        return false;
    struct kiln_cache_stats st = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &st);
    bool ok = kiln_cache_count(c) == NPROG && check_progs(c, all, NPROG, codec) == NPROG &&
              st.dict_id == 0;
    kiln_cache_close(c);
    return ok;
}

KT_CASE(faults_keep_old_cache)
{
    fill_all();
    const char *dir = kt_tmpdir();
    KT_REQUIRE(make_cache(dir, KILN_CODEC_ZSTD, 100));
    /* Superseded records, so that compact has work. */
    struct kiln_cache *c = open_cache(dir, 0, 100, NULL);
    KT_REQUIRE(c);
    for (size_t p = 0; p < NPROG; p += 2)
        KT_REQUIRE_OK(put_prog(c, p, KILN_CODEC_ZSTD));
    KT_REQUIRE_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    /* Each write, sync and rename of a repack (with a new dictionary) and of
     * a compact fails in turn; until the rename the old cache is whole. */
    for (int op = 0; op < 2; op++) {
        bool done = false;
        unsigned faults = 0;
        for (uint64_t nth = 1; !done && nth < 400; nth++) {
            struct faultio f;
            faultio_init(&f);
            c = open_cache(dir, KILN_CACHE_KEEP_STAMP, 100, &f.io);
            KT_REQUIRE(c);
            faultio_arm(&f, nth, FAULTIO_WRITE | FAULTIO_SYNC | FAULTIO_RENAME, KILN_EIO, false);
            struct kiln_cache_rewrite_report r = KILN_CACHE_REWRITE_REPORT_INIT;
            int rc = op == 0 ? kiln_cache_repack(c, KILN_CODEC_KILN, KILN_CACHE_DICT_TRAIN, &r)
                             : kiln_cache_compact(c, &r);
            bool hit = f.faults > 0;
            kiln_cache_close(c);
            faultio_destroy(&f);
            if (!hit) {
                KT_CHECK_OK(rc);
                done = true;
                break;
            }
            faults++;
            if (rc < 0 && !r.rewritten) {
                /* Failed before the commit: the old cache, whole. */
                KT_CHECK(old_cache_whole(dir, KILN_CODEC_ZSTD));
            } else {
                /* The fault hit after the commit (index, dictionary or
                 * last use): the new cache opens and is whole. */
                c = open_cache(dir, KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT, 100, NULL);
                KT_REQUIRE(c);
                KT_CHECK_EQ(check_progs(c, all, NPROG, -1), NPROG);
                kiln_cache_close(c);
                /* Back to the starting point for the next fault. */
                c = open_cache(dir, KILN_CACHE_KEEP_STAMP, 100, NULL);
                KT_REQUIRE(c);
                KT_REQUIRE_OK(kiln_cache_repack(c, KILN_CODEC_ZSTD, KILN_CACHE_DICT_NONE, NULL));
                for (size_t p = 0; p < NPROG; p += 2)
                    KT_REQUIRE_OK(put_prog(c, p, KILN_CODEC_ZSTD));
                KT_REQUIRE_OK(kiln_cache_sync(c));
                kiln_cache_close(c);
            }
        }
        KT_CHECK(done);
        KT_CHECK(faults >= 3);
        if (op == 0) {
            c = open_cache(dir, KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT, 100, NULL);
            KT_REQUIRE(c);
            KT_CHECK(kiln_cache_dict(c) != NULL);
            KT_CHECK_EQ(check_progs(c, all, NPROG, KILN_CODEC_KILN), NPROG);
            kiln_cache_close(c);
            /* Back to zstd with superseded records for the compact round. */
            c = open_cache(dir, KILN_CACHE_KEEP_STAMP, 100, NULL);
            KT_REQUIRE(c);
            KT_REQUIRE_OK(kiln_cache_repack(c, KILN_CODEC_ZSTD, KILN_CACHE_DICT_NONE, NULL));
            for (size_t p = 0; p < NPROG; p += 2)
                KT_REQUIRE_OK(put_prog(c, p, KILN_CODEC_ZSTD));
            KT_REQUIRE_OK(kiln_cache_sync(c));
            kiln_cache_close(c);
        }
    }
}

KT_MAIN(KT_ENTRY(dict_round_trip), KT_ENTRY(dict_copy_lost), KT_ENTRY(repack_chain),
        KT_ENTRY(compact_round_trip), KT_ENTRY(last_use_and_prune), KT_ENTRY(merge_round_trip),
        KT_ENTRY(faults_keep_old_cache))

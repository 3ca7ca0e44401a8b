/*
 * test_prepare.c - the preparation (kiln_prepare) and the warm start
 * (kiln_warm_start), on lavapipe for real.
 *
 * Cases that build pipelines need Vulkan and skip (exit 77) without it.
 * They stay small: shaderc and lavapipe are slow, and the threaded case
 * also runs under ThreadSanitizer.
 */
#include "kiln_test.h"
#include "prep_fixture.h"
#include "foz_writer.h"
#include "kt_vkalloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

struct collected {
    pthread_mutex_t lock;
    struct kiln_vk *vk;
    unsigned count;
};

/* Takes each pipeline handed over and destroys it (counting). */
static void take_pipeline(void *user, struct kiln_key key, struct kiln_vk_pipeline *p)
{
    struct collected *c = user;
    (void)key;
    KT_CHECK(kiln_vk_pipeline_handle(p) != 0);
    pthread_mutex_lock(&c->lock);
    c->count++;
    pthread_mutex_unlock(&c->lock);
    kiln_vk_pipeline_destroy(c->vk, p);
}

struct progress_log {
    unsigned calls;
    uint64_t last_done[2];
    uint64_t last_total[2];
    bool backwards;
};

static void on_progress(void *user, enum kiln_prep_phase phase, uint64_t done, uint64_t total)
{
    struct progress_log *l = user;
    l->calls++;
    if ((unsigned)phase < 2) {
        if (done < l->last_done[phase] && l->last_done[phase] != l->last_total[phase])
            l->backwards = true;
        l->last_done[phase] = done;
        l->last_total[phase] = total;
    }
}

static void cache_path(char *out, size_t cap, const char *root)
{
    snprintf(out, cap, "%s/cache", root);
}

/* ---- cases ------------------------------------------------------------------ */

/* Keys name what the translator sees: deterministic, and different when a
 * stage's kind, text or words differ. */
KT_CASE(program_key)
{
    struct kiln_program *a, *b;
    KT_REQUIRE_OK(kiln_generate_program(KILN_GENERATOR_DEFAULT_SEED, 0, &a));
    KT_REQUIRE_OK(kiln_generate_program(KILN_GENERATOR_DEFAULT_SEED, 0, &b));
    struct kiln_key ka, kb;
    KT_CHECK_OK(kiln_prep_program_key(a, &ka));
    KT_CHECK_OK(kiln_prep_program_key(b, &kb));
    KT_CHECK(kiln_key_equal(ka, kb));
    b->stages[0].src.stage = KILN_VK_STAGE_VERTEX_BIT;
    KT_CHECK_OK(kiln_prep_program_key(b, &kb));
    KT_CHECK(!kiln_key_equal(ka, kb));
    kiln_program_destroy(b);

    KT_REQUIRE_OK(kiln_generate_program(KILN_GENERATOR_DEFAULT_SEED, 2, &b));
    KT_CHECK_OK(kiln_prep_program_key(b, &kb));
    KT_CHECK(!kiln_key_equal(ka, kb));
    kiln_program_destroy(b);

    /* A stage given as SPIR-V is keyed by its words. */
    static const uint32_t words[5] = {0x07230203u, 0x00010300u, 0, 16, 0};
    struct kiln_program_stage spv_stage = {0};
    struct kiln_program spv = {.size = sizeof(struct kiln_program),
                               .stage_size = sizeof(struct kiln_program_stage),
                               .name = "x",
                               .nstages = 1,
                               .stages = &spv_stage};
    spv.stages[0].src.stage = KILN_VK_STAGE_COMPUTE_BIT;
    spv.stages[0].words = (uint32_t *)(uintptr_t)words;
    spv.stages[0].nwords = 5;
    struct kiln_key k1, k2;
    KT_CHECK_OK(kiln_prep_program_key(&spv, &k1));
    spv.stages[0].nwords = 4;
    KT_CHECK_OK(kiln_prep_program_key(&spv, &k2));
    KT_CHECK(!kiln_key_equal(k1, k2));

    struct kiln_program empty = {.size = sizeof(struct kiln_program),
                                 .stage_size = sizeof(struct kiln_program_stage),
                                 .name = "e",
                                 .nstages = 0};
    KT_CHECK_EQ(kiln_prep_program_key(&empty, &k1), KILN_EINVAL);
    kiln_program_destroy(a);
}

/* The stamp names the translator, as the source mixes it: the generator's
 * version for generated programs, the translator's own for a folder, the
 * archive's for Fossilize modules. */
KT_CASE(stamp)
{
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    KT_CHECK_EQ(kiln_prepare_stamp(&o), 0); /* no source */
    struct kiln_translator t = {.size = sizeof(t), .stamp = 42};
    struct kiln_generator g = {.seed = 1, .count = 3};
    struct kiln_program_source gen;
    kiln_generator_source(&g, &gen);
    o.source = &gen;
    o.translator = &t;
    uint64_t gs = kiln_prepare_stamp(&o);
    KT_CHECK_EQ(gs, kiln_generator_stamp(42));
    KT_CHECK(gs != 42);
    struct kiln_program_source plain = {.size = sizeof(plain), .count = 1};
    o.source = &plain;
    KT_CHECK_EQ(kiln_prepare_stamp(&o), 42);
    o.translator = NULL;
    KT_CHECK_EQ(kiln_prepare_stamp(&o), 0);
    struct pf_input in = PF_INPUT_INIT;
    KT_CHECK(pf_stamp(&in) != 0); /* kiln's GLSL translator's, mixed */
}

/* A small generated corpus: prepared, then started; no shader module
 * outlives its create call; a second prepare translates nothing. */
KT_CASE(generated_then_start)
{
    const char *root = kt_tmpdir();
    char cache[4200];
    cache_path(cache, sizeof(cache), root);
    KT_REQUIRE(pf_mkdir(cache) == 0);

    struct kiln_vk *vk = pf_vk(cache);
    KT_REQUIRE(vk != NULL);
    struct collected got = {.lock = PTHREAD_MUTEX_INITIALIZER, .vk = vk};
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 1);
    struct pf_input in = PF_INPUT_INIT;
    in.generate = 2; /* one interpreter, one graphics pair */
    o.vk = vk;
    o.on_pipeline = take_pipeline;
    o.pipeline_user = &got;
    struct progress_log pl = {0};
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&o, &in, on_progress, &pl, &s));
    KT_CHECK_EQ(s.programs, 2);
    KT_CHECK_EQ(s.translated, 2);
    KT_CHECK_EQ(s.cached, 0);
    KT_CHECK_EQ(s.failed, 0);
    KT_CHECK_EQ(s.pipelines_built, 2);
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK_EQ(got.count, 2);
    KT_CHECK(s.vulkan);
    KT_CHECK(s.spirv_bytes > 100000); /* an interpreter alone is over 110 KB */
    KT_CHECK(s.packed_bytes > 0 && s.packed_bytes < s.spirv_bytes);
    KT_CHECK_EQ(s.workers, 1);
    KT_CHECK(s.peak_rss > 0);
    KT_CHECK(pl.calls >= 4);
    KT_CHECK(!pl.backwards);
    KT_CHECK_EQ(pl.last_done[KILN_PREP_PHASE_TRANSLATE], 2);
    KT_CHECK_EQ(pl.last_done[KILN_PREP_PHASE_PIPELINES], 2);

    struct kiln_vk_stats vs = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &vs);
    KT_CHECK_EQ(vs.live_modules, 0);
    KT_CHECK(vs.peak_modules <= 2); /* one worker: one pipeline's stages at most */
    KT_CHECK_EQ(vs.live_pipelines, 0);

    /* Again: everything is in the cache already. */
    got.count = 0;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.translated, 0);
    KT_CHECK_EQ(s.cached, 2);
    KT_CHECK_EQ(s.remade, 0);
    KT_CHECK_EQ(s.pipelines_built, 2);
    KT_CHECK_EQ(got.count, 2);
    KT_CHECK_EQ(s.open_kind, KILN_CACHE_OPENED_INDEX);

    /* The warm start, in a context of its own (it loads pipelines.vkc). */
    kiln_vk_destroy(vk);
    vk = pf_vk(cache);
    KT_REQUIRE(vk != NULL);
    KT_CHECK_EQ(kiln_vk_get_info(vk)->cache_state, KILN_VK_CACHE_LOADED);
    got.vk = vk;
    got.count = 0;
    struct kiln_start_options so = {.size = sizeof(so),
                                    .cache_dir = cache,
                                    .stamp = pf_stamp(&in),
                                    .jobs = 1,
                                    .vk = vk,
                                    .on_pipeline = take_pipeline,
                                    .pipeline_user = &got};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.records, 2);
    KT_CHECK_EQ(ss.loaded, 2);
    KT_CHECK_EQ(ss.missing, 0);
    KT_CHECK_EQ(ss.bad, 0);
    KT_CHECK_EQ(ss.pipelines_built, 2);
    KT_CHECK_EQ(ss.pipelines_failed, 0);
    KT_CHECK_EQ(got.count, 2);
    KT_CHECK_EQ(ss.open_kind, KILN_CACHE_OPENED_INDEX);
    KT_CHECK(ss.bytes > 0);
    kiln_vk_get_stats(vk, &vs);
    KT_CHECK_EQ(vs.live_modules, 0);
    KT_CHECK(vs.peak_modules <= 2);

    /* Another stamp is refused, not started over (the start is read-only). */
    so.stamp ^= 1;
    KT_CHECK_EQ(kiln_warm_start(&so, NULL, NULL, &ss), KILN_ESTAMP);
    KT_CHECK_EQ(ss.step, KILN_PREP_STEP_INPUT);
    kiln_vk_destroy(vk);
}

/* A corpus with one program that does not compile: only it is unmade. */
KT_CASE(broken_program_alone)
{
    const char *root = kt_tmpdir();
    char corpus[4200], cache[4200];
    cache_path(cache, sizeof(cache), root);
    KT_REQUIRE(pf_corpus(corpus, sizeof(corpus), root, true) == 0);

    KT_REQUIRE(pf_need_vulkan()); /* keeps the driver loaded: see pf_vk */

    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 1); /* made by kiln_prepare */
    struct pf_input in = PF_INPUT_INIT;
    in.corpus = corpus;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.programs, PF_GOOD_PROGRAMS + 1);
    KT_CHECK_EQ(s.failed, 1);
    KT_CHECK_EQ(s.translated, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(s.pipelines_built, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK(s.vulkan);
    KT_CHECK_EQ(s.vk_cache_state, KILN_VK_CACHE_NEW);

    /* The warm start finds the three, and the saved pipeline cache. */
    struct kiln_start_options so = {
        .size = sizeof(so), .cache_dir = cache, .any_stamp = true, .jobs = 1};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.records, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.pipelines_built, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.vk_cache_state, KILN_VK_CACHE_LOADED);
}

/* --no-vulkan: translate and store only; the start loads only. A damaged
 * record is counted as missing, never built or returned. */
KT_CASE(no_vulkan_and_damage)
{
    const char *root = kt_tmpdir();
    char corpus[4200], cache[4200], rec[4300];
    cache_path(cache, sizeof(cache), root);
    KT_REQUIRE(pf_corpus(corpus, sizeof(corpus), root, false) == 0);

    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 1);
    struct pf_input in = PF_INPUT_INIT;
    in.corpus = corpus;
    o.no_vulkan = true;
    o.sync_every = 1;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.translated, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(s.pipelines_built, 0);
    KT_CHECK(!s.vulkan);

    struct kiln_start_options so = {.size = sizeof(so),
                                    .cache_dir = cache,
                                    .stamp = pf_stamp(&in),
                                    .jobs = 1,
                                    .no_vulkan = true};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.records, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.missing, 0);
    KT_CHECK(!ss.vulkan);

    /* Flip a byte in the middle of the first record's payload (not the
     * last record: an open checks that one and cuts it as a torn tail). */
    struct kiln_cache_options co = {.size = sizeof(co),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(cache, &co, &c));
    struct kiln_cache_entry *e;
    size_t ne;
    KT_REQUIRE_OK(kiln_cache_entries(c, &e, &ne));
    KT_REQUIRE(ne == PF_GOOD_PROGRAMS);
    long at = (long)(e[0].offset + 64 + e[0].size / 2);
    KT_REQUIRE(e[0].size > 128); /* its middle is in a stage's blob */
    kiln_cache_entries_free(e);
    kiln_cache_close(c);
    snprintf(rec, sizeof(rec), "%s/%s", cache, KILN_CACHE_RECORDS_FILE);
    FILE *f = fopen(rec, "r+b");
    KT_REQUIRE(f != NULL);
    KT_REQUIRE(fseek(f, at, SEEK_SET) == 0);
    int ch = fgetc(f);
    KT_REQUIRE(ch != EOF);
    KT_REQUIRE(fseek(f, at, SEEK_SET) == 0);
    fputc(ch ^ 0x5a, f);
    KT_REQUIRE(fclose(f) == 0);

    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.records, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS - 1);
    KT_CHECK_EQ(ss.missing, 1);

    /* A prepare that builds pipelines reads the records back, finds the
     * damaged one, and makes it again. */
    KT_REQUIRE(pf_need_vulkan()); /* keeps the driver loaded: see pf_vk */
    o.no_vulkan = false;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.remade, 1);
    KT_CHECK_EQ(s.translated, 1);
    KT_CHECK_EQ(s.cached, PF_GOOD_PROGRAMS - 1);
    KT_CHECK_EQ(s.failed, 0);
    KT_CHECK_EQ(s.pipelines_built, PF_GOOD_PROGRAMS);
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.missing, 0);
}

/* Bad input stops the run at once, with the step that says so. */
KT_CASE(bad_input)
{
    const char *root = kt_tmpdir();
    char missing[4200], cache[4200];
    snprintf(missing, sizeof(missing), "%s/no-such-folder", root);
    cache_path(cache, sizeof(cache), root);
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    struct pf_input in = PF_INPUT_INIT;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_CHECK_EQ(pf_prepare(&o, &in, NULL, NULL, &s), KILN_EINVAL); /* no cache folder */
    KT_CHECK_EQ(s.step, KILN_PREP_STEP_INPUT);

    o.cache_dir = cache;
    in.corpus = missing;
    KT_CHECK_EQ(pf_prepare(&o, &in, NULL, NULL, &s), KILN_ENOENT);
    KT_CHECK_EQ(s.step, KILN_PREP_STEP_INPUT);

    in.corpus = NULL;
    in.generate = 0;
    KT_CHECK_EQ(pf_prepare(&o, &in, NULL, NULL, &s), KILN_EINVAL);
    KT_CHECK_EQ(s.step, KILN_PREP_STEP_INPUT);

    /* No source at all. */
    KT_CHECK_EQ(kiln_prepare(&o, NULL, NULL, &s), KILN_EINVAL);
    KT_CHECK_EQ(s.step, KILN_PREP_STEP_INPUT);

    /* Programs of source text and no translator: each fails alone. */
    struct kiln_generator g = {.seed = 1, .count = 2};
    struct kiln_program_source gs;
    kiln_generator_source(&g, &gs);
    o.source = &gs;
    o.no_vulkan = true;
    KT_CHECK_OK(kiln_prepare(&o, NULL, NULL, &s));
    KT_CHECK_EQ(s.failed, 2);
    KT_CHECK_EQ(s.translated, 0);
    o.source = NULL;
    o.no_vulkan = false;

    struct kiln_start_options so = {.size = sizeof(so), .cache_dir = root, .any_stamp = true};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_CHECK_EQ(kiln_warm_start(&so, NULL, NULL, &ss), KILN_ENOENT);
    KT_CHECK_EQ(ss.step, KILN_PREP_STEP_INPUT);
}

/* Two workers at once, through prepare and start (also run under TSan:
 * kept tiny). */
/* The fixture corpus and an empty cache folder in the case's folder, and a
 * context over that cache (corpus and cache hold PATH_CAP bytes). */
#define PATH_CAP 4200
static void corpus_and_cache(char *corpus, char *cache, struct kiln_vk **vk)
{
    const char *root = kt_tmpdir();
    cache_path(cache, PATH_CAP, root);
    KT_REQUIRE(pf_corpus(corpus, PATH_CAP, root, true) == 0);
    KT_REQUIRE(pf_mkdir(cache) == 0);
    *vk = pf_vk(cache);
    KT_REQUIRE(*vk != NULL);
}

KT_CASE(threads)
{
    char corpus[PATH_CAP], cache[PATH_CAP];
    struct kiln_vk *vk;
    corpus_and_cache(corpus, cache, &vk);
    struct collected got = {.lock = PTHREAD_MUTEX_INITIALIZER, .vk = vk};
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 2);
    struct pf_input in = PF_INPUT_INIT;
    in.corpus = corpus;
    o.sync_every = 2; /* a sync in the middle of the puts */
    o.vk = vk;
    o.on_pipeline = take_pipeline;
    o.pipeline_user = &got;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.translated, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(s.failed, 1);
    KT_CHECK_EQ(s.pipelines_built, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(got.count, PF_GOOD_PROGRAMS);
    struct kiln_vk_stats vs = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &vs);
    KT_CHECK_EQ(vs.live_modules, 0);
    KT_CHECK(vs.peak_modules <= 4); /* two workers, two stages each at most */

    got.count = 0;
    struct kiln_start_options so = {.size = sizeof(so),
                                    .cache_dir = cache,
                                    .any_stamp = true,
                                    .jobs = 2,
                                    .vk = vk,
                                    .on_pipeline = take_pipeline,
                                    .pipeline_user = &got};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.read_threads, 2);
    KT_CHECK_EQ(ss.pipelines_built, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(got.count, PF_GOOD_PROGRAMS);
    kiln_vk_get_stats(vk, &vs);
    KT_CHECK_EQ(vs.live_modules, 0);
    kiln_vk_destroy(vk);
}

/* ---- the cache's dictionary, Fossilize imports, last use ------------------------ */

/* Reads a whole file of the cache folder (NULL when it is not there). */
static void *cache_file(const char *cache, const char *name, size_t *n)
{
    char path[4300];
    snprintf(path, sizeof(path), "%s/%s", cache, name);
    void *data = NULL;
    *n = 0;
    if (kiln_io_read_file(kiln_io_default(), path, 64u << 20, &data, n) < 0)
        return NULL;
    return data;
}

static bool same_file(const char *cache, const char *name, const void *before, size_t n)
{
    size_t m;
    void *now = cache_file(cache, name, &m);
    bool same = now && m == n && memcmp(now, before, n) == 0;
    free(now);
    return same;
}

/* @return whether the first stage of `key`'s record needs a dictionary to
 * unpack (unpacking it without one is refused). */
static bool needs_dict(struct kiln_cache *c, struct kiln_key key)
{
    struct kiln_cache_result *res = NULL;
    if (kiln_cache_load_many(c, &key, 1, 1, &res) != 1) {
        kiln_cache_results_free(res, 1);
        return false;
    }
    struct kiln_stage_blob st[2];
    int ns = kiln_program_payload_parse(res[0].data, res[0].size, 2, st);
    const uint32_t *w = NULL;
    bool needs = ns > 0 &&
                 kiln_unpack_scratch(st[0].blob, st[0].blob_size, NULL, &w) == KILN_EINVAL &&
                 kiln_unpack_scratch(st[0].blob, st[0].blob_size, kiln_cache_dict(c), &w) > 0;
    kiln_cache_results_free(res, 1);
    kiln_pack_thread_cleanup(); /* the main thread's scratch: no exit destructor */
    return needs;
}

/* kiln cache repack --dict, then kiln prepare and kiln start: the cache is
 * kept (not started over), new programs are packed with its dictionary,
 * and both build every pipeline unpacking with it. */
KT_CASE(dict_kept_after_repack)
{
    const char *root = kt_tmpdir();
    char cache[4200];
    cache_path(cache, sizeof(cache), root);
    KT_REQUIRE(pf_need_vulkan()); /* keeps the driver loaded: see pf_vk */

    /* Six programs: 3 compute + 3 graphics pairs, 9 stages to train on. */
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 1);
    struct pf_input in = PF_INPUT_INIT;
    in.generate = 6;
    o.no_vulkan = true;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.dict_id, 0);

    struct kiln_cache_options ko = {.size = sizeof(ko), .flags = KILN_CACHE_KEEP_STAMP};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(cache, &ko, &c));
    struct kiln_cache_rewrite_report rep = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_REQUIRE_OK(kiln_cache_repack(c, KILN_CODEC_KILN, KILN_CACHE_DICT_TRAIN, &rep));
    uint64_t dict_id = kiln_pack_dict_id(kiln_cache_dict(c));
    KT_REQUIRE(dict_id != 0);
    kiln_cache_close(c);

    /* One program more, and the pipelines. */
    in.generate = 7;
    o.no_vulkan = false;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.open_kind, KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(s.cached, 6);
    KT_CHECK_EQ(s.translated, 1);
    KT_CHECK_EQ(s.failed, 0);
    KT_CHECK_EQ(s.pipelines_built, 7);
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK(!s.dict_trained);
    KT_CHECK_EQ(s.dict_id, dict_id);

    /* The new program (index 6) was packed with the dictionary. */
    struct kiln_program *p6;
    struct kiln_key k6;
    KT_REQUIRE_OK(kiln_generate_program(in.seed, 6, &p6));
    KT_CHECK_OK(kiln_prep_program_key(p6, &k6));
    kiln_program_destroy(p6);
    struct kiln_cache_options ro = {.size = sizeof(ro),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP |
                                             KILN_CACHE_USE_DICT};
    KT_REQUIRE_OK(kiln_cache_open(cache, &ro, &c));
    KT_CHECK_EQ(kiln_cache_count(c), 7);
    KT_CHECK(needs_dict(c, k6));
    kiln_cache_close(c);

    struct kiln_start_options so = {
        .size = sizeof(so), .cache_dir = cache, .stamp = pf_stamp(&in), .jobs = 1};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, 7);
    KT_CHECK_EQ(ss.pipelines_built, 7);
    KT_CHECK_EQ(ss.pipelines_failed, 0);
    KT_CHECK_EQ(ss.bad, 0);
    KT_CHECK_EQ(ss.dict_id, dict_id);
}

/* kiln prepare --dict: trains after translating, repacks, builds from the
 * repacked records; a later run keeps the dictionary; too few stages give
 * a warning, not a failure. */
KT_CASE(prepare_dict)
{
    const char *root = kt_tmpdir();
    char cache[4200], small[4200], corpus[4200];
    cache_path(cache, sizeof(cache), root);
    snprintf(small, sizeof(small), "%s/small", root);
    KT_REQUIRE(pf_need_vulkan()); /* keeps the driver loaded: see pf_vk */

    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 1);
    struct pf_input in = PF_INPUT_INIT;
    in.generate = 6;
    o.dict = true;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.translated, 6);
    KT_CHECK(s.dict_trained);
    KT_CHECK(s.dict_id != 0);
    KT_CHECK(s.dict_bytes > 0);
    KT_CHECK(s.dict_payload_after > 0 && s.dict_payload_after < s.dict_payload_before);
    KT_CHECK_EQ(s.pipelines_built, 6); /* from the repacked records */
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK_EQ(s.remade, 0);

    /* Every record is packed with it. */
    struct kiln_cache_options ro = {.size = sizeof(ro),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP |
                                             KILN_CACHE_USE_DICT};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(cache, &ro, &c));
    KT_CHECK_EQ(kiln_pack_dict_id(kiln_cache_dict(c)), s.dict_id);
    struct kiln_cache_entry *e;
    size_t ne;
    KT_REQUIRE_OK(kiln_cache_entries(c, &e, &ne));
    KT_CHECK_EQ(ne, 6);
    for (size_t i = 0; i < ne; i++)
        KT_CHECK(needs_dict(c, e[i].key));
    kiln_cache_entries_free(e);
    kiln_cache_close(c);

    /* Again: nothing to translate, the dictionary kept. */
    uint64_t dict_id = s.dict_id;
    o.no_vulkan = true;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.open_kind, KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(s.translated, 0);
    KT_CHECK(!s.dict_trained);
    KT_CHECK_EQ(s.dict_id, dict_id);

    /* Only 4 stages: no dictionary, and the run goes on. */
    KT_REQUIRE(pf_corpus(corpus, sizeof(corpus), root, false) == 0);
    o.cache_dir = small;
    in.corpus = corpus;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.translated, PF_GOOD_PROGRAMS);
    KT_CHECK(!s.dict_trained);
    KT_CHECK_EQ(s.dict_id, 0);

    /* A dictionary goes only with the kiln codec. */
    o.codec = KILN_CODEC_ZSTD;
    KT_CHECK_EQ(pf_prepare(&o, &in, NULL, NULL, &s), KILN_EINVAL);
    KT_CHECK_EQ(s.step, KILN_PREP_STEP_INPUT);
}

/* The archive the Fossilize cases use (two compute pipelines, four
 * graphics modules). */
static void foz_archive(char *out, size_t cap)
{
    /* Without the shared corpus: an archive written from generated SPIR-V. */
    FW_NEED(fw_archive("computenbody.f93c6e96adcd7946.1.foz", out, cap));
}

/* kiln import foz, then kiln prepare --corpus FILE.foz: nothing is
 * translated or stored again, and the compute programs are built or, when
 * kiln's layout does not hold them, skipped; the other way round, the
 * import finds the prepared modules. */
KT_CASE(foz_import_then_prepare)
{
    const char *root = kt_tmpdir();
    char cache[4200], other[4200], foz[4200];
    cache_path(cache, sizeof(cache), root);
    snprintf(other, sizeof(other), "%s/other", root);
    foz_archive(foz, sizeof(foz));
    KT_REQUIRE(pf_mkdir(cache) == 0);
    KT_REQUIRE(pf_need_vulkan()); /* keeps the driver loaded: see pf_vk */

    struct kiln_cache_options io = {.size = sizeof(io),
                                    .stamp = KILN_FOZ_STAMP,
                                    .flags = KILN_CACHE_CREATE | KILN_CACHE_USE_DICT};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(cache, &io, &c));
    struct kiln_foz_import_report ir = KILN_FOZ_IMPORT_REPORT_INIT;
    KT_REQUIRE_OK(kiln_foz_import(c, foz, &ir));
    kiln_cache_close(c);
    KT_REQUIRE(ir.compute >= 1);
    KT_REQUIRE(ir.imported > ir.compute); /* graphics modules too */

    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 1);
    struct pf_input in = PF_INPUT_INIT;
    in.corpus = foz;
    KT_CHECK_EQ(pf_stamp(&in), KILN_FOZ_STAMP);
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.open_kind, KILN_CACHE_OPENED_INDEX);
    KT_CHECK_EQ(s.stamp, KILN_FOZ_STAMP);
    KT_CHECK_EQ(s.programs, ir.compute);
    KT_CHECK_EQ(s.translated, 0);
    KT_CHECK_EQ(s.cached, ir.compute);
    /* computenbody's two compute modules read a uniform buffer at binding
     * 1, which kiln's layout lacks: skipped, never handed to the driver.
     * The archive written without the corpus holds one that fits: built. */
    uint64_t fits = strstr(foz, "/sascha-willems/") ? 0 : ir.compute;
    KT_CHECK_EQ(s.pipelines_built, fits);
    KT_CHECK_EQ(s.pipelines_skipped, ir.compute - fits);
    KT_CHECK_EQ(s.pipelines_failed, 0);

    /* Nothing was stored again. */
    struct kiln_cache_options ro = {.size = sizeof(ro),
                                    .stamp = KILN_FOZ_STAMP,
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT};
    KT_REQUIRE_OK(kiln_cache_open(cache, &ro, &c));
    struct kiln_cache_stats cs = KILN_CACHE_STATS_INIT;
    kiln_cache_get_stats(c, &cs);
    KT_CHECK_EQ(cs.records, ir.imported);
    KT_CHECK_EQ(cs.superseded, 0);
    kiln_cache_close(c);

    /* The warm start builds and skips as prepare did and leaves the lone
     * graphics modules alone (not counted as bad). */
    struct kiln_start_options so = {
        .size = sizeof(so), .cache_dir = cache, .stamp = KILN_FOZ_STAMP, .jobs = 1};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, ir.imported);
    KT_CHECK_EQ(ss.pipelines_built, fits);
    KT_CHECK_EQ(ss.pipelines_skipped, ir.compute - fits);
    KT_CHECK_EQ(ss.lone_modules, ir.imported - ir.compute);
    KT_CHECK_EQ(ss.bad, 0);
    KT_CHECK_EQ(ss.pipelines_failed, 0);

    /* Prepare first, import after: the import finds the compute modules. */
    o.cache_dir = other;
    o.no_vulkan = true;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.translated, ir.compute);
    KT_REQUIRE_OK(kiln_cache_open(other, &io, &c));
    struct kiln_foz_import_report ir2 = KILN_FOZ_IMPORT_REPORT_INIT;
    KT_REQUIRE_OK(kiln_foz_import(c, foz, &ir2));
    kiln_cache_close(c);
    KT_CHECK_EQ(ir2.present, ir.compute);
    KT_CHECK_EQ(ir2.imported, ir.imported - ir.compute);
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.translated, 0);
    KT_CHECK_EQ(s.cached, ir.compute);
}

/* The warm start records last use (what kiln cache prune goes by) and
 * never rewrites a record; read-only (asked, or another writer holds the
 * cache) it writes nothing at all. */
/* The fixture's corpus prepared without Vulkan into a cache of its own,
 * named in cache[4200]. @return 0, or -1 with the failure reported. */
static int prepared_cache(char *cache)
{
    const char *root = kt_tmpdir();
    char corpus[4200];
    cache_path(cache, 4200, root);
    if (pf_corpus(corpus, sizeof(corpus), root, false) != 0)
        return -1;
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 1);
    struct pf_input in = PF_INPUT_INIT;
    in.corpus = corpus;
    o.no_vulkan = true;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    return pf_prepare(&o, &in, NULL, NULL, &s) == KILN_OK ? 0 : -1;
}

KT_CASE(start_records_use)
{
    char cache[4200];
    KT_REQUIRE(prepared_cache(cache) == 0);

    /* Age every record: last used on day 1000 (without the marks file,
     * every record counts as used on the open's day, and close writes it). */
    const uint32_t old_day = 1000;
    char kpu_path[4300];
    snprintf(kpu_path, sizeof(kpu_path), "%s/%s", cache, KILN_CACHE_USE_FILE);
    KT_REQUIRE(remove(kpu_path) == 0);
    struct kiln_cache_options ko = {
        .size = sizeof(ko), .flags = KILN_CACHE_KEEP_STAMP, .today = old_day};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(cache, &ko, &c));
    struct kiln_cache_entry *e;
    size_t ne;
    KT_REQUIRE_OK(kiln_cache_entries(c, &e, &ne));
    KT_REQUIRE(ne == PF_GOOD_PROGRAMS);
    struct kiln_key keys[PF_GOOD_PROGRAMS];
    for (size_t i = 0; i < ne; i++)
        keys[i] = e[i].key;
    kiln_cache_entries_free(e);
    struct kiln_cache_result *res;
    KT_CHECK_EQ(kiln_cache_load_many(c, keys, ne, 1, &res), PF_GOOD_PROGRAMS);
    kiln_cache_results_free(res, ne);
    kiln_cache_close(c); /* writes the marks */
    KT_REQUIRE_OK(kiln_cache_open(cache, &ko, &c));
    uint32_t day = 0;
    KT_CHECK_OK(kiln_cache_last_use(c, keys[0], &day));
    KT_CHECK_EQ(day, old_day);
    kiln_cache_close(c);

    size_t nkpc, nkpx, nkpu;
    void *kpc = cache_file(cache, KILN_CACHE_RECORDS_FILE, &nkpc);
    void *kpx = cache_file(cache, KILN_CACHE_INDEX_FILE, &nkpx);
    void *kpu = cache_file(cache, KILN_CACHE_USE_FILE, &nkpu);
    KT_REQUIRE(kpc && kpx && kpu);

    /* Another writer holds the cache: read-only, nothing written. */
    struct kiln_cache *holder;
    KT_REQUIRE_OK(kiln_cache_open(cache, &ko, &holder));
    struct kiln_start_options so = {
        .size = sizeof(so), .cache_dir = cache, .any_stamp = true, .jobs = 1, .no_vulkan = true};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_CHECK_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS);
    KT_CHECK(!ss.use_recorded);
    KT_CHECK(strstr(ss.use_text, "another writer") != NULL);
    kiln_cache_close(holder);
    /* Asked to be read-only. */
    so.read_only = true;
    KT_CHECK_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS);
    KT_CHECK(!ss.use_recorded);
    KT_CHECK(same_file(cache, KILN_CACHE_RECORDS_FILE, kpc, nkpc));
    KT_CHECK(same_file(cache, KILN_CACHE_INDEX_FILE, kpx, nkpx));
    KT_CHECK(same_file(cache, KILN_CACHE_USE_FILE, kpu, nkpu));

    /* The ordinary start records use; records and index stay as they were. */
    so.read_only = false;
    KT_CHECK_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS);
    KT_CHECK(ss.use_recorded);
    KT_CHECK(same_file(cache, KILN_CACHE_RECORDS_FILE, kpc, nkpc));
    KT_CHECK(same_file(cache, KILN_CACHE_INDEX_FILE, kpx, nkpx));
    KT_CHECK(!same_file(cache, KILN_CACHE_USE_FILE, kpu, nkpu));
    free(kpc);
    free(kpx);
    free(kpu);

    struct kiln_cache_options ro = {.size = sizeof(ro),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    KT_REQUIRE_OK(kiln_cache_open(cache, &ro, &c));
    uint32_t today = kiln_cache_today(c);
    KT_CHECK(today > old_day);
    for (size_t i = 0; i < PF_GOOD_PROGRAMS; i++) {
        day = 0;
        KT_CHECK_OK(kiln_cache_last_use(c, keys[i], &day));
        KT_CHECK_EQ(day, today);
    }
    kiln_cache_close(c);

    /* So a prune by age keeps them all. */
    struct kiln_cache_options wo = {.size = sizeof(wo), .flags = KILN_CACHE_KEEP_STAMP};
    KT_REQUIRE_OK(kiln_cache_open(cache, &wo, &c));
    struct kiln_cache_prune_options po = {.size = sizeof(po), .older_than_days = 30};
    struct kiln_cache_rewrite_report rep = KILN_CACHE_REWRITE_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_prune(c, &po, &rep));
    KT_CHECK_EQ(rep.dropped, 0);
    KT_CHECK_EQ(kiln_cache_count(c), PF_GOOD_PROGRAMS);
    kiln_cache_close(c);
}

/* An embedder's own source: programs that come as SPIR-V under keys the
 * caller chose, with a stamp of its own and no translator at all. */
struct own_source {
    struct kiln_program *spirv[3]; /* generated and translated beforehand */
    _Atomic unsigned loads;
};

static int own_load(void *user, size_t i, struct kiln_program **out)
{
    struct own_source *o = user;
    const struct kiln_program *from = o->spirv[i];
    atomic_fetch_add(&o->loads, 1);
    struct kiln_program *p = NULL;
    int rc = kiln_program_create(from->name, &p);
    if (rc < 0)
        return rc;
    p->nstages = from->nstages;
    for (unsigned s = 0; s < from->nstages; s++) {
        struct kiln_program_stage *st = &p->stages[s];
        st->src.stage = from->stages[s].src.stage;
        st->src.name = strdup(from->stages[s].src.name);
        st->words = malloc(from->stages[s].nwords * 4);
        if (!st->src.name || !st->words) {
            kiln_program_destroy(p);
            return KILN_ENOMEM;
        }
        memcpy(st->words, from->stages[s].words, from->stages[s].nwords * 4);
        st->nwords = from->stages[s].nwords;
    }
    p->has_key = true;
    p->key = (struct kiln_key){.hi = 0x6f776e, .lo = i};
    *out = p;
    return KILN_OK;
}

static uint64_t own_stamp(void *user, uint64_t translator_stamp)
{
    (void)user;
    return translator_stamp ^ 0x1234;
}

KT_CASE(own_source)
{
    const char *root = kt_tmpdir();
    char cache[4200];
    cache_path(cache, sizeof(cache), root);
    struct kiln_glsl *g = NULL;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &g));
    struct own_source own = {.loads = 0};
    for (uint32_t i = 0; i < 3; i++)
        KT_REQUIRE_OK(kiln_generate_spirv(kiln_glsl_translator(g), 5, i, &own.spirv[i]));
    kiln_glsl_destroy(g);

    struct kiln_program_source src = {
        .size = sizeof(src), .user = &own, .count = 3, .load = own_load, .stamp = own_stamp};
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 2);
    o.source = &src;
    o.no_vulkan = true;
    KT_CHECK_EQ(kiln_prepare_stamp(&o), 0x1234); /* no translator: 0, mixed */
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_prepare(&o, NULL, NULL, &s));
    KT_CHECK_EQ(s.programs, 3);
    KT_CHECK_EQ(s.translated, 3);
    KT_CHECK_EQ(s.failed, 0);
    KT_CHECK_EQ(s.stamp, 0x1234);
    KT_CHECK_EQ(atomic_load(&own.loads), 3);

    /* Stored under the caller's keys, with Vulkan stage bits. */
    struct kiln_cache_options co = {
        .size = sizeof(co), .stamp = 0x1234, .flags = KILN_CACHE_READ_ONLY};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(cache, &co, &c));
    KT_CHECK_EQ(kiln_cache_count(c), 3);
    for (uint64_t i = 0; i < 3; i++) {
        struct kiln_key k = {.hi = 0x6f776e, .lo = i};
        struct kiln_cache_result *res;
        KT_REQUIRE(kiln_cache_load_many(c, &k, 1, 1, &res) == 1);
        KT_REQUIRE_OK(res[0].status);
        struct kiln_stage_blob st[2];
        int ns = kiln_program_payload_parse(res[0].data, res[0].size, 2, st);
        KT_CHECK_EQ(ns, own.spirv[i]->nstages);
        KT_CHECK_EQ(st[0].stage, i % 2 == 0 ? KILN_VK_STAGE_COMPUTE_BIT : KILN_VK_STAGE_VERTEX_BIT);
        kiln_cache_results_free(res, 1);
    }
    kiln_cache_close(c);

    /* Again: every program found by its key, nothing stored. */
    KT_REQUIRE_OK(kiln_prepare(&o, NULL, NULL, &s));
    KT_CHECK_EQ(s.cached, 3);
    KT_CHECK_EQ(s.translated, 0);
    for (size_t i = 0; i < 3; i++)
        kiln_program_destroy(own.spirv[i]);
}

/* ---- the warm start's cancel, and the run on the application's executor -- */

static atomic_uint cancel_asked;
static unsigned cancel_after; /* say stop once asked more than this often */

static bool stop_after(void *user)
{
    (void)user;
    return atomic_fetch_add(&cancel_asked, 1) >= cancel_after;
}

static atomic_uint inline_submits;

/* An executor that runs every task inline, inside submit. */
static int run_inline(void (*fn)(void *), void *arg, void *user)
{
    (void)user;
    atomic_fetch_add(&inline_submits, 1);
    fn(arg);
    return 0;
}

/* kiln_start_options.cancel stops the builds (KILN_ECANCELED, `canceled`,
 * fewer built), a start afterwards builds them all; both runs also go on an
 * executor that runs tasks inline, which kiln_prepare and kiln_warm_start
 * hand every pool and load to. */
KT_CASE(start_cancel_and_executor)
{
    char corpus[PATH_CAP], cache[PATH_CAP];
    struct kiln_vk *vk;
    corpus_and_cache(corpus, cache, &vk);
    struct collected got = {.lock = PTHREAD_MUTEX_INITIALIZER, .vk = vk};
    struct kiln_executor ex = {.size = sizeof ex, .submit = run_inline};
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 2);
    struct pf_input in = PF_INPUT_INIT;
    in.corpus = corpus;
    o.no_vulkan = true;
    o.executor = &ex;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    atomic_store(&inline_submits, 0);
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.translated, PF_GOOD_PROGRAMS);
    KT_CHECK(atomic_load(&inline_submits) > 0); /* the translate pool ran on it */

    struct kiln_start_options so = {.size = sizeof(so),
                                    .cache_dir = cache,
                                    .any_stamp = true,
                                    .jobs = 1,
                                    .vk = vk,
                                    .on_pipeline = take_pipeline,
                                    .pipeline_user = &got,
                                    .cancel = stop_after,
                                    .executor = &ex};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    cancel_after = 1; /* the first build goes, then stop */
    atomic_store(&cancel_asked, 0);
    atomic_store(&inline_submits, 0);
    KT_CHECK_EQ(kiln_warm_start(&so, NULL, NULL, &ss), KILN_ECANCELED);
    KT_CHECK(ss.canceled);
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS);
    KT_CHECK(ss.pipelines_built >= 1 && ss.pipelines_built < PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(got.count, (unsigned)ss.pipelines_built);
    KT_CHECK(atomic_load(&cancel_asked) > 1);
    KT_CHECK(atomic_load(&inline_submits) > 0);
    KT_CHECK(strstr(kiln_last_errmsg(), "kiln_warm_start") != NULL);

    /* Not cancelled: every program is built. */
    cancel_after = 1000;
    got.count = 0;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK(!ss.canceled);
    KT_CHECK_EQ(ss.pipelines_built, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(got.count, PF_GOOD_PROGRAMS);
    kiln_vk_destroy(vk);
}

/* With no context given, kiln_prepare and kiln_warm_start make their own
 * with the application's VkAllocationCallbacks (vk_allocator): the driver
 * allocates through them, and every block is given back when the run ends.
 * Control: the same runs without vk_allocator count nothing. */
KT_CASE(own_context_takes_vk_allocator)
{
    char corpus[PATH_CAP], cache[PATH_CAP];
    struct kiln_vk *vk;
    corpus_and_cache(corpus, cache, &vk);
    kiln_vk_destroy(vk); /* the runs make their own */
    struct kt_vk_counts counts = {0};
    VkAllocationCallbacks cb = kt_vk_counting_callbacks(&counts);
    for (int with = 0; with < 2; with++) {
        atomic_store(&counts.allocs, 0);
        struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
        pf_options(&o, cache, 1);
        o.vk_allocator = with ? &cb : NULL;
        struct pf_input in = PF_INPUT_INIT;
        in.corpus = corpus;
        struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
        KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
        KT_CHECK(s.vulkan);
        long long by_prepare = atomic_load(&counts.allocs);

        struct kiln_start_options so = KILN_START_OPTIONS_INIT;
        so.cache_dir = cache;
        so.any_stamp = true;
        so.jobs = 1;
        so.vk_allocator = with ? &cb : NULL;
        struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
        KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
        KT_CHECK_EQ(ss.pipelines_built, PF_GOOD_PROGRAMS);
        long long by_start = atomic_load(&counts.allocs) - by_prepare;
        printf("%s vk_allocator: %lld allocations by prepare, %lld by start, %lld live\n",
               with ? "with" : "without", by_prepare, by_start,
               (long long)atomic_load(&counts.live));
        KT_CHECK(with ? by_prepare > 0 : by_prepare == 0);
        KT_CHECK(with ? by_start > 0 : by_start == 0);
        KT_CHECK_EQ(atomic_load(&counts.live), 0);
    }
}

/* Marks every record of `cache` used on `day`, then `n` of them on `day + 1`. */
static void age_records(const char *cache, uint32_t day, const struct kiln_key *recent, size_t n,
                        struct kiln_key *all, size_t *nall)
{
    char kpu_path[4300];
    snprintf(kpu_path, sizeof(kpu_path), "%s/%s", cache, KILN_CACHE_USE_FILE);
    remove(kpu_path);
    struct kiln_cache_options ko = {
        .size = sizeof(ko), .flags = KILN_CACHE_KEEP_STAMP, .today = day};
    struct kiln_cache *c;
    KT_REQUIRE_OK(kiln_cache_open(cache, &ko, &c));
    struct kiln_cache_entry *e;
    KT_REQUIRE_OK(kiln_cache_entries(c, &e, nall));
    for (size_t i = 0; i < *nall; i++)
        all[i] = e[i].key;
    kiln_cache_entries_free(e);
    struct kiln_cache_result *res;
    KT_CHECK_EQ(kiln_cache_load_many(c, all, *nall, 1, &res), (int64_t)*nall);
    kiln_cache_results_free(res, *nall);
    kiln_cache_close(c);
    if (!n)
        return;
    ko.today = day + 1;
    KT_REQUIRE_OK(kiln_cache_open(cache, &ko, &c));
    KT_CHECK_EQ(kiln_cache_load_many(c, recent, n, 1, &res), (int64_t)n);
    kiln_cache_results_free(res, n);
    kiln_cache_close(c);
}

static uint32_t last_use_of(const char *cache, struct kiln_key key)
{
    struct kiln_cache_options ko = {.size = sizeof(ko),
                                    .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP};
    struct kiln_cache *c;
    uint32_t day = 0;
    if (kiln_cache_open(cache, &ko, &c) == KILN_OK) {
        kiln_cache_last_use(c, key, &day);
        kiln_cache_close(c);
    }
    return day;
}

/* A warm start of a subset (issue 27): the N most recently used, or the
 * records of some keys, are read and built; no other record is read (its
 * last use stays as it was), and the whole start is the control. */
KT_CASE(start_subset)
{
    char cache[4200];
    KT_REQUIRE(prepared_cache(cache) == 0);

    struct kiln_key all[PF_GOOD_PROGRAMS];
    size_t n = 0;
    age_records(cache, 1000, NULL, 0, all, &n);
    KT_REQUIRE(n == PF_GOOD_PROGRAMS);
    struct kiln_key recent[2] = {all[0], all[2]};
    age_records(cache, 1000, recent, 2, all, &n);

    /* The two most recently used: read, marked today; the other untouched. */
    struct kiln_start_options so = {
        .size = sizeof(so), .cache_dir = cache, .any_stamp = true, .jobs = 1, .recent = 2};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    /* Built on kiln's own context where there is a device. */
    int rc = kiln_warm_start(&so, NULL, NULL, &ss);
    KT_CHECK(rc == KILN_OK || ss.step == KILN_PREP_STEP_VULKAN);
    KT_CHECK_EQ(ss.records, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.chosen, 2);
    KT_CHECK_EQ(ss.loaded, 2);
    KT_CHECK(!ss.vulkan ||
             ss.pipelines_built + ss.pipelines_skipped + ss.pipelines_failed + ss.bad == 2);
    KT_CHECK_EQ(last_use_of(cache, all[1]), 1000);
    KT_CHECK(last_use_of(cache, all[0]) > 1001);
    KT_CHECK(last_use_of(cache, all[2]) > 1001);

    /* By key: one held, one the cache lacks. */
    struct kiln_key asked[2] = {all[1], {.lo = 0x1234, .hi = 0x5678}};
    so.recent = 0;
    so.keys = asked;
    so.nkeys = 2;
    so.no_vulkan = true;
    KT_CHECK_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.chosen, 1);
    KT_CHECK_EQ(ss.keys_absent, 1);
    KT_CHECK_EQ(ss.loaded, 1);
    KT_CHECK_EQ(ss.missing, 0);
    /* Keys without their array: refused. */
    so.keys = NULL;
    KT_CHECK_EQ(kiln_warm_start(&so, NULL, NULL, &ss), KILN_EINVAL);

    /* The control: no subset reads every record. */
    so.nkeys = 0;
    KT_CHECK_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.chosen, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS);
}

/* A first start on a shipped cache (issue 27): no cache of the user's yet,
 * a layer beneath it; the start makes an empty one with the layer's stamp
 * and loads (and builds) the layer's programs, writing nothing there. */
KT_CASE(start_on_layer)
{
    char layer[4200], top[4300];
    KT_REQUIRE(prepared_cache(layer) == 0);
    snprintf(top, sizeof(top), "%s-user", layer); /* beside it, in the case's folder */
    size_t nkpc = 0, nkpu = 0;
    void *kpc = cache_file(layer, KILN_CACHE_RECORDS_FILE, &nkpc);
    void *kpu = cache_file(layer, KILN_CACHE_USE_FILE, &nkpu);
    KT_REQUIRE(kpc && kpu);
    const char *layers[] = {layer};
    struct kiln_start_options so = {.size = sizeof(so),
                                    .cache_dir = top,
                                    .any_stamp = true,
                                    .jobs = 1,
                                    .no_vulkan = true,
                                    .layers = layers,
                                    .nlayers = 1};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_CHECK_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.records, PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(ss.loaded, PF_GOOD_PROGRAMS);
    KT_CHECK(same_file(layer, KILN_CACHE_RECORDS_FILE, kpc, nkpc));
    KT_CHECK(same_file(layer, KILN_CACHE_USE_FILE, kpu, nkpu));
    free(kpc);
    free(kpu);
    /* The control: the same start without the layer finds nothing. */
    so.nlayers = 0;
    KT_CHECK_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, 0);
}

KT_MAIN(KT_ENTRY(program_key), KT_ENTRY(stamp), KT_ENTRY(generated_then_start),
        KT_ENTRY(broken_program_alone), KT_ENTRY(no_vulkan_and_damage), KT_ENTRY(bad_input),
        KT_ENTRY(threads), KT_ENTRY(dict_kept_after_repack), KT_ENTRY(prepare_dict),
        KT_ENTRY(foz_import_then_prepare), KT_ENTRY(start_records_use), KT_ENTRY(own_source),
        KT_ENTRY(start_cancel_and_executor), KT_ENTRY(own_context_takes_vk_allocator),
        KT_ENTRY(start_subset), KT_ENTRY(start_on_layer))

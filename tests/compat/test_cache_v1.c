/*
 * test_cache_v1.c - caches made by an earlier kiln still open, load, check
 * clean and build.
 *
 * tests/fixtures/cache-v1 holds two caches written before the stage change
 * (program payload version 1; see its README.md). Each case copies one to
 * a fresh folder (the warm start writes last use, and a fixture must never
 * change), then reads it with today's code.
 */
#include "kiln_test.h"
#include "kt_vklayer.h"
#include "prep_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURES KILN_SOURCE_DIR "/tests/fixtures/cache-v1"

/* The stamps the fixtures were written with. */
#define GEN_STAMP UINT64_C(0x092caf855595f3c6)
#define GEN_DICT  UINT64_C(0x8ad2fb91a4a7ed54)

/* Copies fixture `name` into a new folder in `root` (kt_tmpdir(): a fresh
 * one); its path goes to `out`. */
static void copy_fixture_in(const char *root, const char *name, char *out, size_t cap)
{
    static const char *const files[] = {"programs.kpc", "programs.kpx", "programs.kpd",
                                        "programs.kpu"};
    snprintf(out, cap, "%s/%s", root, name);
    KT_REQUIRE(kt_mkdir(out) == 0);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char from[4096], to[4200];
        snprintf(from, sizeof(from), "%s/%s/%s", FIXTURES, name, files[i]);
        snprintf(to, sizeof(to), "%s/%s", out, files[i]);
        void *data = NULL;
        size_t n = 0;
        int rc = kiln_io_read_file(kiln_io_default(), from, 1u << 20, &data, &n);
        if (rc == KILN_ENOENT)
            continue;
        KT_REQUIRE_OK(rc);
        KT_REQUIRE_OK(kiln_io_replace_file(kiln_io_default(), to, data, n));
        free(data);
    }
}

static void copy_fixture(const char *name, char *out, size_t cap)
{
    copy_fixture_in(kt_tmpdir(), name, out, cap);
}

/* What a cache's stages add up to. */
struct tally {
    unsigned records, compute, graphics, vertex, fragment, geometry;
};

/* Opens `dir` read-only, loads every record, parses each payload and
 * unpacks every stage to SPIR-V; counts the stage kinds. */
static void load_all(const char *dir, uint64_t stamp, struct tally *t)
{
    memset(t, 0, sizeof(*t));
    struct kiln_cache_options o = {
        .size = sizeof(o), .stamp = stamp, .flags = KILN_CACHE_READ_ONLY | KILN_CACHE_USE_DICT};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(dir, &o, &c));
    struct kiln_cache_entry *e = NULL;
    size_t n = 0;
    KT_REQUIRE_OK(kiln_cache_entries(c, &e, &n));
    struct kiln_key *keys = calloc(n ? n : 1, sizeof(*keys));
    KT_REQUIRE(keys != NULL);
    for (size_t i = 0; i < n; i++)
        keys[i] = e[i].key;
    struct kiln_cache_result *res = NULL;
    KT_REQUIRE(kiln_cache_load_many(c, keys, n, 2, &res) == (int64_t)n);
    const struct kiln_pack_dict *dict = kiln_cache_dict(c);
    for (size_t i = 0; i < n; i++) {
        KT_REQUIRE_OK(res[i].status);
        struct kiln_stage_blob st[KILN_PAYLOAD_MAX_STAGES];
        int ns = kiln_program_payload_parse(res[i].data, res[i].size, KILN_PAYLOAD_MAX_STAGES, st);
        KT_REQUIRE(ns >= 1);
        KT_CHECK_EQ(ns, e[i].stages);
        size_t spirv = 0;
        for (int s = 0; s < ns; s++) {
            size_t raw = 0;
            KT_REQUIRE_OK(kiln_blob_info(st[s].blob, st[s].blob_size, NULL, &raw));
            uint32_t *words = malloc(raw ? raw : 4);
            KT_REQUIRE(words != NULL);
            int64_t nw = kiln_unpack(st[s].blob, st[s].blob_size, dict, words, raw / 4);
            KT_REQUIRE(nw >= 5);
            KT_CHECK_EQ(words[0], 0x07230203u);
            spirv += (size_t)nw * 4;
            free(words);
        }
        KT_CHECK_EQ(spirv, e[i].raw_size);
        if (ns == 1 && st[0].stage == KILN_VK_STAGE_COMPUTE_BIT)
            t->compute++;
        else if (ns == 2 && st[0].stage == KILN_VK_STAGE_VERTEX_BIT &&
                 st[1].stage == KILN_VK_STAGE_FRAGMENT_BIT)
            t->graphics++;
        else if (ns == 1 && st[0].stage == KILN_VK_STAGE_VERTEX_BIT)
            t->vertex++;
        else if (ns == 1 && st[0].stage == KILN_VK_STAGE_FRAGMENT_BIT)
            t->fragment++;
        else if (ns == 1 && st[0].stage == KILN_VK_STAGE_GEOMETRY_BIT)
            t->geometry++;
        t->records++;
    }
    kiln_cache_results_free(res, n);
    kiln_cache_entries_free(e);
    free(keys);
    kiln_cache_close(c);
}

static void check_clean(const char *dir)
{
    struct kiln_cache_check_report r = KILN_CACHE_CHECK_REPORT_INIT;
    KT_CHECK_OK(kiln_cache_check(dir, NULL, false, &r));
    KT_CHECK(r.whole);
    KT_CHECK_EQ(r.bad_records, 0);
    KT_CHECK_EQ(r.damaged_bytes, 0);
}

/* Six generated programs, packed with a dictionary. */
KT_CASE(generated)
{
    char dir[4096];
    copy_fixture("gen", dir, sizeof(dir));
    check_clean(dir);
    struct tally t;
    load_all(dir, GEN_STAMP, &t);
    KT_CHECK_EQ(t.records, 6);
    KT_CHECK_EQ(t.compute, 3);
    KT_CHECK_EQ(t.graphics, 3);
    check_clean(dir);
}

/* Twelve modules of two Fossilize archives, of four kinds of stage. */
KT_CASE(imported)
{
    char dir[4096];
    copy_fixture("foz", dir, sizeof(dir));
    check_clean(dir);
    struct tally t;
    load_all(dir, KILN_FOZ_STAMP, &t);
    KT_CHECK_EQ(t.records, 12);
    KT_CHECK_EQ(t.compute, 1);
    KT_CHECK(t.vertex >= 1);
    KT_CHECK(t.fragment >= 1);
    KT_CHECK(t.geometry >= 1);
    KT_CHECK_EQ(t.compute + t.vertex + t.fragment + t.geometry, 12);
    check_clean(dir);
}

/* Preparing the same generated programs again finds every one: the keys
 * of a program did not change (only where this shaderc gives the stamp the
 * fixture was made with; another shaderc makes another cache). */
KT_CASE(prepare_finds_all)
{
    char dir[4096];
    copy_fixture("gen", dir, sizeof(dir));
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    struct pf_input in = PF_INPUT_INIT;
    o.cache_dir = dir;
    in.generate = 6;
    o.no_vulkan = true;
    o.jobs = 1;
    if (pf_stamp(&in) != GEN_STAMP) {
        printf("skipped: this shaderc gives another translator stamp than the fixture's\n");
        exit(77);
    }
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    KT_CHECK_EQ(s.cached, 6);
    KT_CHECK_EQ(s.translated, 0);
    KT_CHECK_EQ(s.dict_id, GEN_DICT);
    check_clean(dir);
}

/* Payloads are written as version 2 (VkShaderStageFlagBits kept as they
 * are); version 1's stage numbers are converted when read. */
KT_CASE(payload_versions)
{
    static const uint32_t words[5] = {0x07230203u, 0x00010300u, 0, 16, 0};
    void *blob = NULL;
    size_t bsize = 0;
    KT_REQUIRE_OK(kiln_pack(words, 5, KILN_CODEC_RAW, NULL, &blob, &bsize));
    /* v1 value -> what it reads as. */
    static const uint32_t v1[][2] = {
        {0, KILN_VK_STAGE_COMPUTE_BIT},
        {1, KILN_VK_STAGE_VERTEX_BIT},
        {2, KILN_VK_STAGE_FRAGMENT_BIT},
        {0x80000000u | KILN_VK_STAGE_GEOMETRY_BIT, KILN_VK_STAGE_GEOMETRY_BIT},
        {0x80000000u | KILN_VK_STAGE_COMPUTE_BIT | KILN_VK_STAGE_VERTEX_BIT,
         KILN_VK_STAGE_COMPUTE_BIT | KILN_VK_STAGE_VERTEX_BIT},
        {0x80000000u, 0},
    };
    enum { N = sizeof(v1) / sizeof(v1[0]) };
    struct kiln_stage_blob in[N], out[N];
    for (unsigned i = 0; i < N; i++)
        in[i] = (struct kiln_stage_blob){.stage = v1[i][1], .blob = blob, .blob_size = bsize};
    void *payload = NULL;
    size_t size = 0;
    KT_REQUIRE_OK(kiln_program_payload_build(in, N, &payload, &size));
    unsigned char *p = payload;
    KT_CHECK_EQ(p[2], 2); /* version 2 */
    KT_REQUIRE(kiln_program_payload_parse(payload, size, N, out) == N);
    for (unsigned i = 0; i < N; i++)
        KT_CHECK_EQ(out[i].stage, v1[i][1]);

    /* The same payload as version 1 wrote it. */
    p[2] = 1;
    for (unsigned i = 0; i < N; i++) {
        uint32_t v = v1[i][0];
        for (unsigned b = 0; b < 4; b++)
            p[4 + 8 * i + b] = (unsigned char)(v >> (8 * b));
    }
    KT_REQUIRE(kiln_program_payload_parse(payload, size, N, out) == N);
    for (unsigned i = 0; i < N; i++)
        KT_CHECK_EQ(out[i].stage, v1[i][1]);

    /* A version kiln does not know is refused. */
    p[2] = 3;
    KT_CHECK_EQ(kiln_program_payload_parse(payload, size, N, out), KILN_ECORRUPT_BLOB);
    kiln_pack_free(payload);
    kiln_pack_free(blob);
}

static void count_pipeline(void *user, struct kiln_key key, struct kiln_vk_pipeline *p)
{
    (void)key;
    struct kiln_vk *vk = *(struct kiln_vk **)user;
    kiln_vk_pipeline_destroy(vk, p);
}

/* Both caches warm-start on the device. Every generated program is built;
 * the imported compute module declares a uniform buffer at binding 2 and
 * a storage buffer at binding 1, which kiln's layout does not have, so it
 * is skipped rather than handed to the driver (such a create call is
 * invalid, and lavapipe crashed in it one run in forty). */
KT_CASE(warm_start)
{
    const char *names[] = {"gen", "foz"};
    const uint64_t built[] = {6, 0};
    const uint64_t skipped[] = {0, 1};
    const uint64_t lone[] = {0, 11};
    for (size_t i = 0; i < 2; i++) {
        char dir[4096];
        copy_fixture(names[i], dir, sizeof(dir));
        struct kiln_vk *vk = pf_vk(NULL); /* exit(77) without Vulkan */
        struct kiln_start_options so = {.size = sizeof(so),
                                        .cache_dir = dir,
                                        .any_stamp = true,
                                        .jobs = 2,
                                        .vk = vk,
                                        .on_pipeline = count_pipeline,
                                        .pipeline_user = &vk};
        struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
        KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
        KT_CHECK_EQ(ss.missing, 0);
        KT_CHECK_EQ(ss.bad, 0);
        KT_CHECK_EQ(ss.pipelines_failed, 0);
        KT_CHECK_EQ(ss.pipelines_built, built[i]);
        KT_CHECK_EQ(ss.pipelines_skipped, skipped[i]);
        KT_CHECK_EQ(ss.lone_modules, lone[i]);
        kiln_vk_destroy(vk);
        check_clean(dir);
    }
}

/* The same warm starts under the Khronos validation layer: the layer
 * reports no error, so kiln hands the driver nothing invalid. Before kiln
 * checked every binding, the imported compute module reached
 * vkCreateComputePipelines with two bindings kiln's layout lacks (layout-
 * 00703), and lavapipe crashed in it now and then. */
KT_CASE(warm_start_validated)
{
    if (!kt_have_validation_layer()) {
        printf("skipped: the Khronos validation layer is not installed "
               "(Debian: vulkan-validationlayers)\n");
        exit(77);
    }
    const char *root = kt_tmpdir(); /* one folder: the log outlives each start */
    char log[4200];
    KT_REQUIRE(kt_validation_begin(root, log, sizeof(log)));
    const char *names[] = {"gen", "foz"};
    for (size_t i = 0; i < 2; i++) {
        char dir[4096];
        copy_fixture_in(root, names[i], dir, sizeof(dir));
        struct kiln_vk *vk = pf_vk(NULL);
        struct kiln_start_options so = {
            .size = sizeof(so), .cache_dir = dir, .any_stamp = true, .jobs = 2, .vk = vk};
        struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
        KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
        KT_CHECK_EQ(ss.pipelines_failed, 0);
        kiln_vk_destroy(vk);
    }
    kt_validation_end();
    KT_CHECK_EQ(kt_validation_errors(log), 0);
}

KT_MAIN(KT_ENTRY(payload_versions), KT_ENTRY(generated), KT_ENTRY(imported),
        KT_ENTRY(prepare_finds_all), KT_ENTRY(warm_start), KT_ENTRY(warm_start_validated))

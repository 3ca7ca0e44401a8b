/*
 * test_api_abi.c - the growable-struct rule (docs/abi.md) as a client sees
 * it, through the public API of the shared library.
 *
 * An older client is played by a struct whose size stops before a late
 * field (size = offsetof of that field): the library must give it the
 * defaults for what it does not cover, and write back only the bytes its
 * size covers (a canary past it stays). A newer client is played by a
 * larger struct around this one: refused when its extra bytes are set,
 * accepted when they are zero. A size of 0 is refused. Arrays the library
 * allocates are laid out at the element size the caller passes; an array
 * of builders the caller passes is read at its first element's size.
 */
#include "kiln.h"
#include "kiln_test.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define STAMP 0xab1u

static struct kiln_key key_of(uint64_t i)
{
    return (struct kiln_key){.lo = i + 1, .hi = 0xab1};
}

/* A cache with three records in the case's folder. @return 0 or the error. */
static int open_filled(struct kiln_cache **c)
{
    struct kiln_cache_options o = KILN_CACHE_OPTIONS_INIT;
    o.stamp = STAMP;
    o.flags = KILN_CACHE_CREATE;
    int rc = kiln_cache_open(kt_case_dir(), &o, c);
    for (uint64_t i = 0; rc == KILN_OK && i < 3; i++) {
        uint32_t payload[4] = {(uint32_t)i, 1, 2, 3};
        rc = kiln_cache_put(*c, key_of(i), payload, sizeof(payload), sizeof(payload),
                            KILN_CODEC_RAW, 1);
    }
    return rc == KILN_OK ? kiln_cache_sync(*c) : rc;
}

/* An older client's options stop before `today`: the 12345 past its size
 * is not read, the day is the clock's. */
KT_CASE(older_options_get_defaults)
{
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(open_filled(&c));
    kiln_cache_close(c);
    struct kiln_cache_options o = KILN_CACHE_OPTIONS_INIT;
    o.size = offsetof(struct kiln_cache_options, today);
    o.stamp = STAMP;
    o.today = 12345;
    KT_REQUIRE_OK(kiln_cache_open(kt_case_dir(), &o, &c));
    KT_CHECK(kiln_cache_today(c) != 12345);
    KT_CHECK_EQ(kiln_cache_count(c), 3);
    kiln_cache_close(c);
    /* The same options with the whole size: today is read. */
    o.size = sizeof(o);
    KT_REQUIRE_OK(kiln_cache_open(kt_case_dir(), &o, &c));
    KT_CHECK_EQ(kiln_cache_today(c), 12345);
    kiln_cache_close(c);
}

/* An older client's stats stop before open_ns: the canary past its size
 * is untouched, the fields it has are filled. */
KT_CASE(older_report_written_to_its_size)
{
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(open_filled(&c));
    struct kiln_cache_stats st;
    memset(&st, 0xa5, sizeof(st));
    st.size = offsetof(struct kiln_cache_stats, open_ns);
    KT_REQUIRE_OK(kiln_cache_get_stats(c, &st));
    KT_CHECK_EQ(st.size, offsetof(struct kiln_cache_stats, open_ns));
    KT_CHECK_EQ(st.records, 3);
    KT_CHECK_EQ(st.stamp, STAMP);
    const unsigned char *p = (const unsigned char *)&st;
    size_t bad = 0;
    for (size_t i = offsetof(struct kiln_cache_stats, open_ns); i < sizeof(st); i++)
        bad += p[i] != 0xa5;
    KT_CHECK_EQ(bad, 0);
    kiln_cache_close(c);
}

/* A struct zeroed but not initialised is refused, as options and as a
 * report. */
KT_CASE(size_zero_refused)
{
    struct kiln_cache_options o;
    memset(&o, 0, sizeof(o));
    o.flags = KILN_CACHE_CREATE;
    struct kiln_cache *c = NULL;
    KT_CHECK_EQ(kiln_cache_open(kt_case_dir(), &o, &c), KILN_EINVAL);
    KT_CHECK(c == NULL);
    KT_REQUIRE_OK(open_filled(&c));
    struct kiln_cache_stats st;
    memset(&st, 0, sizeof(st));
    KT_CHECK_EQ(kiln_cache_get_stats(c, &st), KILN_EINVAL);
    struct kiln_cache_rewrite_report r;
    memset(&r, 0, sizeof(r));
    KT_CHECK_EQ(kiln_cache_compact(c, &r), KILN_EINVAL);
    kiln_cache_close(c);
}

/* A newer client: its options have a field this library does not know. */
struct newer_options {
    struct kiln_cache_options o;
    uint64_t later_field;
};

KT_CASE(newer_struct_tail)
{
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(open_filled(&c));
    kiln_cache_close(c);
    struct newer_options n;
    memset(&n, 0, sizeof(n));
    n.o.size = sizeof(n);
    n.o.stamp = STAMP;
    n.later_field = 7;
    KT_CHECK_EQ(kiln_cache_open(kt_case_dir(), &n.o, &c), KILN_EINVAL);
    n.later_field = 0;
    KT_REQUIRE_OK(kiln_cache_open(kt_case_dir(), &n.o, &c));
    /* A newer report: the bytes past this library's are zeroed. */
    struct {
        struct kiln_cache_stats st;
        uint64_t later_field;
    } ns;
    memset(&ns, 0xa5, sizeof(ns));
    ns.st.size = sizeof(ns);
    KT_REQUIRE_OK(kiln_cache_get_stats(c, &ns.st));
    KT_CHECK_EQ(ns.st.records, 3);
    KT_CHECK_EQ(ns.later_field, 0);
    KT_CHECK_EQ(ns.st.size, sizeof(ns));
    kiln_cache_close(c);
}

/* An older client's kiln_cache_entry stops before checksum: the array has
 * its stride, keys and sizes in place. */
KT_CASE(array_at_caller_stride)
{
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(open_filled(&c));
    const size_t stride = offsetof(struct kiln_cache_entry, checksum);
    struct kiln_cache_entry *e = NULL;
    size_t n = 0;
    KT_REQUIRE_OK(kiln_cache_entries_sized(c, stride, &e, &n));
    KT_REQUIRE(n == 3);
    for (size_t i = 0; i < n; i++) {
        struct kiln_cache_entry got;
        memset(&got, 0, sizeof(got));
        memcpy(&got, (const unsigned char *)e + i * stride, stride);
        KT_CHECK(kiln_key_equal(got.key, key_of(i)));
        KT_CHECK_EQ(got.size, 16);
    }
    kiln_cache_entries_free(e);
    KT_CHECK_EQ(kiln_cache_entries_sized(c, 0, &e, &n), KILN_EINVAL);

    /* Loaded results at a larger stride (a newer client's): each one's
     * payload where that stride puts it, freed at the same stride. */
    struct wide {
        struct kiln_cache_result r;
        uint64_t later_field;
    };
    struct kiln_key keys[3] = {key_of(0), key_of(1), key_of(2)};
    struct kiln_cache_result *res = NULL;
    KT_REQUIRE(kiln_cache_load_many_sized(c, keys, 3, 1, sizeof(struct wide), &res) == 3);
    const struct wide *w = (const struct wide *)res;
    for (size_t i = 0; i < 3; i++) {
        KT_CHECK_EQ(w[i].r.status, KILN_OK);
        KT_CHECK_EQ(w[i].r.size, 16);
        KT_CHECK_EQ(((const uint32_t *)w[i].r.data)[0], i);
        KT_CHECK_EQ(w[i].later_field, 0);
    }
    kiln_cache_results_free_sized(res, 3, sizeof(struct wide));
    kiln_cache_close(c);
}

static char log_text[4096];

static void capture(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    (void)user, (void)level;
    size_t n = strlen(log_text);
    snprintf(log_text + n, sizeof(log_text) - n, "%s: %s\n", module, line);
}

static int no_build(void *user, struct kiln_build_request *req)
{
    (void)user, (void)req;
    return KILN_ENOTSUP;
}

/* A builder array is read at its first element's size as the stride: a
 * newer client's larger builders (zero tail) pass the door, one of
 * another size in the array is refused, naming it. The options carry no
 * cache folder, so a prepare past the door stops there. */
KT_CASE(builder_array_stride)
{
    struct wide {
        struct kiln_builder b;
        uint64_t later_field;
    } wb[2];
    memset(wb, 0, sizeof(wb));
    for (int i = 0; i < 2; i++) {
        wb[i].b.size = sizeof(wb[i]);
        wb[i].b.kind = KILN_STATE_APP;
        wb[i].b.build = no_build;
    }
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    o.builders = &wb[0].b;
    o.nbuilders = 2;
    o.no_vulkan = true;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    kiln_log_set_sink(capture, NULL);
    log_text[0] = '\0';
    KT_CHECK_EQ(kiln_prepare(&o, NULL, NULL, &s), KILN_EINVAL);
    KT_CHECK(strstr(log_text, "no cache folder given") != NULL);
    KT_CHECK(strstr(log_text, "abi:") == NULL);
    wb[1].b.size = sizeof(struct kiln_builder);
    log_text[0] = '\0';
    KT_CHECK_EQ(kiln_prepare(&o, NULL, NULL, &s), KILN_EINVAL);
    KT_CHECK(strstr(log_text, "kiln_builder 1: size") != NULL);
    KT_CHECK(strstr(log_text, "no cache folder given") == NULL);
    wb[1].b.size = sizeof(wb[1]);
    wb[1].later_field = 1;
    log_text[0] = '\0';
    KT_CHECK_EQ(kiln_prepare(&o, NULL, NULL, &s), KILN_EINVAL);
    KT_CHECK(strstr(log_text, "kiln_builder: fields past byte") != NULL);
    kiln_log_set_sink(NULL, NULL);
}

/* The program model carries its own sizes: kiln_program.size and the
 * stride of its stages (stage_size). A newer client's program, larger
 * structs with zero tails, keys and copies as this one's does; a set tail
 * or a size of 0 is refused; a copy comes back in the layout asked for. */
struct newer_stage {
    struct kiln_program_stage s;
    uint64_t later;
};
struct newer_program {
    struct kiln_program p;
    uint64_t later;
};

KT_CASE(program_model_sizes)
{
    static const uint32_t words[5] = {0x07230203u, 0x00010000u, 0, 1, 0};
    struct kiln_program_stage st = {.src = {.stage = KILN_VK_STAGE_COMPUTE_BIT, .name = "cs"},
                                    .words = (uint32_t *)(uintptr_t)words,
                                    .nwords = 5};
    struct kiln_program mine = KILN_PROGRAM_INIT;
    mine.name = "cs";
    mine.nstages = 1;
    mine.stages = &st;
    struct kiln_key k1, k2;
    KT_REQUIRE_OK(kiln_program_key(&mine, &k1));

    struct newer_stage nst[2];
    memset(nst, 0, sizeof(nst));
    nst[0].s = st;
    nst[1].s = st;
    struct newer_program newer;
    memset(&newer, 0, sizeof(newer));
    newer.p = mine;
    newer.p.size = sizeof(newer);
    newer.p.stage_size = sizeof(struct newer_stage);
    newer.p.nstages = 2;
    newer.p.stages = &nst[0].s;
    KT_REQUIRE_OK(kiln_program_key(&newer.p, &k2)); /* read at its stride */
    KT_CHECK(k1.lo != k2.lo || k1.hi != k2.hi);     /* two stages, not one */

    struct kiln_program *copy = NULL;
    KT_REQUIRE_OK(
        kiln_program_copy_sized(&newer.p, sizeof(newer), sizeof(struct newer_stage), &copy));
    KT_CHECK_EQ(copy->size, sizeof(newer));
    KT_CHECK_EQ(copy->stage_size, sizeof(struct newer_stage));
    const struct newer_stage *cs = (const struct newer_stage *)(const void *)copy->stages;
    KT_CHECK_EQ(cs[1].s.nwords, 5);
    KT_CHECK_EQ(cs[1].later, 0);
    struct kiln_key k3;
    KT_REQUIRE_OK(kiln_program_key(copy, &k3));
    KT_CHECK(k3.lo == k2.lo && k3.hi == k2.hi);
    kiln_program_destroy(copy);

    nst[1].later = 1; /* a field this kiln does not know */
    KT_CHECK_EQ(kiln_program_key(&newer.p, &k2), KILN_EINVAL);
    nst[1].later = 0;
    newer.later = 7;
    KT_CHECK_EQ(kiln_program_copy(&newer.p, &copy), KILN_EINVAL);
    KT_CHECK(copy == NULL);
    mine.size = 0;
    KT_CHECK_EQ(kiln_program_key(&mine, &k1), KILN_EINVAL);
    mine.size = sizeof(mine);
    mine.stage_size = 0;
    KT_CHECK_EQ(kiln_program_key(&mine, &k1), KILN_EINVAL);
    KT_CHECK_EQ(kiln_program_create_sized("x", sizeof(struct kiln_program) - 1,
                                          sizeof(struct kiln_program_stage), &copy),
                KILN_EINVAL);
}

/* The committed Fossilize seed: one graphics pipeline over two modules. */
#define TRIANGLE KILN_SOURCE_DIR "/fuzz/corpus/foz/triangle.foz"

/* A cache for Fossilize imports in the case's folder. @return 0 or the error. */
static int open_foz_cache(struct kiln_cache **c)
{
    struct kiln_cache_options o = KILN_CACHE_OPTIONS_INIT;
    o.stamp = KILN_FOZ_STAMP;
    o.flags = KILN_CACHE_CREATE;
    return kiln_cache_open(kt_case_dir(), &o, c);
}

/* Counts the bytes of `p` from `from` to `to` that are not `canary`. */
static size_t changed(const void *p, size_t from, size_t to, unsigned char canary)
{
    size_t bad = 0;
    for (size_t i = from; i < to; i++)
        bad += ((const unsigned char *)p)[i] != canary;
    return bad;
}

/* Fossilize's reports and stats by the same rule: an older report is
 * written to its size, a size of 0 refused (a get_stats writes nothing). */
KT_CASE(foz_reports_to_their_size)
{
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(open_foz_cache(&c));
    struct kiln_foz_import_report r;
    memset(&r, 0, sizeof(r));
    KT_CHECK_EQ(kiln_foz_import(c, TRIANGLE, &r), KILN_EINVAL);
    KT_CHECK_EQ(kiln_cache_count(c), 0);
    memset(&r, 0xa5, sizeof(r));
    size_t cut = offsetof(struct kiln_foz_import_report, spirv_bytes);
    r.size = cut;
    KT_REQUIRE_OK(kiln_foz_import(c, TRIANGLE, &r));
    KT_CHECK_EQ(r.size, cut);
    KT_CHECK_EQ(r.modules, 2);
    KT_CHECK_EQ(r.imported + r.present + r.invalid, 2);
    KT_CHECK_EQ(changed(&r, cut, sizeof(r), 0xa5), 0);
    kiln_cache_close(c);

    const char *paths[] = {TRIANGLE};
    struct kiln_foz_pipelines *fp = NULL;
    KT_REQUIRE_OK(kiln_foz_pipelines_open(paths, 1, &fp));
    struct kiln_foz_pipelines_stats st;
    memset(&st, 0, sizeof(st));
    kiln_foz_pipelines_get_stats(fp, SIZE_MAX, &st);
    KT_CHECK_EQ(st.unique[KILN_FOZ_KIND_GRAPHICS], 0); /* size 0: not written */
    st = (struct kiln_foz_pipelines_stats)KILN_FOZ_PIPELINES_STATS_INIT;
    kiln_foz_pipelines_get_stats(fp, SIZE_MAX, &st);
    KT_CHECK_EQ(st.size, sizeof(st));
    KT_CHECK_EQ(st.unique[KILN_FOZ_KIND_GRAPHICS], 1);
    kiln_foz_pipelines_destroy(fp);
}

/* The reports of kiln_foz_pipelines_import_sized are laid out at the
 * caller's stride: an older caller's shorter elements are filled to their
 * size and nothing past them is written. */
KT_CASE(foz_pipelines_reports_at_stride)
{
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(open_foz_cache(&c));
    const char *paths[] = {TRIANGLE};
    struct kiln_foz_pipelines *fp = NULL;
    KT_REQUIRE_OK(kiln_foz_pipelines_open(paths, 1, &fp));
    KT_REQUIRE(kiln_foz_pipelines_archives(fp) == 1);
    size_t stride = offsetof(struct kiln_foz_pipelines_report, recorded_invalid);
    unsigned char buf[2 * sizeof(struct kiln_foz_pipelines_report)];
    memset(buf, 0xa5, sizeof(buf));
    KT_CHECK_EQ(kiln_foz_pipelines_import_sized(c, fp, 4, (void *)buf, NULL, NULL), KILN_EINVAL);
    KT_REQUIRE_OK(kiln_foz_pipelines_import_sized(c, fp, stride, (void *)buf, NULL, NULL));
    struct kiln_foz_pipelines_report r;
    memset(&r, 0, sizeof(r));
    memcpy(&r, buf, stride);
    KT_CHECK_EQ(r.size, stride);
    KT_CHECK_EQ(r.found.size, sizeof(r.found));
    KT_CHECK_EQ(r.found.unique[KILN_FOZ_KIND_GRAPHICS], 1);
    KT_CHECK_EQ(r.imported[KILN_FOZ_KIND_GRAPHICS] + r.invalid[KILN_FOZ_KIND_GRAPHICS], 1);
    KT_CHECK_EQ(changed(buf, stride, sizeof(buf), 0xa5), 0);
    kiln_foz_pipelines_destroy(fp);
    kiln_cache_close(c);
}

KT_MAIN(KT_ENTRY(program_model_sizes), KT_ENTRY(older_options_get_defaults),
        KT_ENTRY(older_report_written_to_its_size), KT_ENTRY(size_zero_refused),
        KT_ENTRY(newer_struct_tail), KT_ENTRY(array_at_caller_stride),
        KT_ENTRY(builder_array_stride), KT_ENTRY(foz_reports_to_their_size),
        KT_ENTRY(foz_pipelines_reports_at_stride))

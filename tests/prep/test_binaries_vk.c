/*
 * test_binaries_vk.c - the host tier of driver binaries in kiln_prepare and
 * kiln_warm_start on a Vulkan device (lavapipe in CI). The fake provider
 * (bin_fake.h) stands in for a device with VK_KHR_pipeline_binary, so the
 * runs' use of the tier (capture, make, counts, a driver update) is tested
 * where the device lacks it; `tier` uses the device's own provider and
 * skips with one line where there is none. The archive cases prepare a
 * Fossilize archive (fw_write_pipelines; they skip without shaderc): its
 * pipelines go through the Fossilize builder (KILN_BUILDER_BINARIES).
 */
#include <vulkan/vulkan.h>

#include "bin_fake.h"
#include "foz_writer.h"
#include "kiln_test.h"
#include "prep_fixture.h"

#include "kiln/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void three_generated(char *cache, size_t cap, struct kiln_prepare_options *o,
                            struct pf_input *in, uint32_t binaries)
{
    snprintf(cache, cap, "%s/cache", kt_tmpdir());
    pf_options(o, cache, 2);
    *in = (struct pf_input)PF_INPUT_INIT;
    in->generate = 3;
    o->binaries = binaries;
}

/* One case's run: the fake provider, its cache, options and last summary. */
struct faked {
    struct bin_fake f;
    struct kiln_prepare_options o;
    struct pf_input in;
    struct kiln_prepare_summary ps;
    char cache[4200];
};

/* Installs the fake provider (global key byte `global`) and prepares three
 * generated programs with the tier on. @return whether the prepare ran. */
static bool faked_prepare(struct faked *r, uint8_t global)
{
    bin_fake_init(&r->f, global);
    kiln__bin_test_provider = &r->f.p;
    three_generated(r->cache, sizeof(r->cache), &r->o, &r->in, KILN_BINARIES_ON);
    r->ps = (struct kiln_prepare_summary)KILN_PREPARE_SUMMARY_INIT;
    return pf_prepare(&r->o, &r->in, NULL, NULL, &r->ps) == KILN_OK;
}

static int start(const char *cache, uint32_t binaries, bool rebuild, bool read_only,
                 struct kiln_start_summary *s)
{
    struct kiln_start_options so = KILN_START_OPTIONS_INIT;
    so.cache_dir = cache;
    so.any_stamp = true;
    so.jobs = 2;
    so.binaries = binaries;
    so.binaries_rebuild = rebuild;
    so.read_only = read_only;
    *s = (struct kiln_start_summary)KILN_START_SUMMARY_INIT;
    return kiln_warm_start(&so, NULL, NULL, s);
}

KT_CASE(fake_prepare_then_start)
{
    pf_need_vulkan();
    struct faked r;
    KT_REQUIRE(faked_prepare(&r, 0x41));
    KT_CHECK(r.ps.binaries_used);
    KT_CHECK_EQ(r.ps.pipelines_built, 3);
    KT_CHECK_EQ(r.ps.binaries_kept, 3);
    KT_CHECK_EQ(atomic_load(&r.f.captures), 3);

    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK(s.binaries_used);
    KT_CHECK_EQ(s.pipelines_built, 3);
    KT_CHECK_EQ(s.from_binaries, 3);
    KT_CHECK_EQ(s.compiled, 0);
    KT_CHECK_EQ(s.binaries_kept, 0);
    KT_CHECK_EQ(s.binaries_records, 3);
    KT_CHECK(s.binaries_bytes > 3 * 2 * BIN_FAKE_DATA);
    KT_CHECK(strstr(s.binaries_dir, "binaries/10005-1234-4141") != NULL);
    KT_CHECK_EQ(strlen(s.binaries_global_key), 40);
    KT_CHECK_EQ(atomic_load(&r.f.creates), 3);
    KT_CHECK_EQ(atomic_load(&r.f.mismatches), 0);

    /* The same r.cache with the tier off: pipelines.vkc, nothing from binaries. */
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_OFF, false, false, &s));
    KT_CHECK(!s.binaries_used);
    KT_CHECK_EQ(s.pipelines_built, 3);
    KT_CHECK_EQ(s.from_binaries, 0);
    KT_CHECK_EQ(s.from_binaries + s.from_pipeline_cache + s.compiled, 3);
    kiln__bin_test_provider = NULL;
}

KT_CASE(fake_stale_key_rebuilds)
{
    pf_need_vulkan();
    struct faked r;
    KT_REQUIRE(faked_prepare(&r, 0x51));
    KT_CHECK_EQ(r.ps.binaries_kept, 3);
    /* A second prepare: the ledger answers, nothing built or kept. */
    KT_REQUIRE_OK(pf_prepare(&r.o, &r.in, NULL, NULL, &r.ps));
    KT_CHECK_EQ(r.ps.pipelines_built, 0);
    KT_CHECK_EQ(r.ps.binaries_kept, 0);
    KT_CHECK_EQ(r.ps.binaries_stale, 0);

    /* A driver update: a read-only start sees the stale folder, makes
     * nothing from it, removes nothing. */
    r.f.global = 0x52;
    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, true, &s));
    KT_CHECK_EQ(s.binaries_stale, 1);
    KT_CHECK_EQ(s.binaries_stale_dropped, 0);
    KT_CHECK_EQ(s.from_binaries, 0);
    KT_CHECK_EQ(s.pipelines_built, 3);
    KT_CHECK_EQ(s.binaries_kept, 0);

    /* The next prepare fills the new folder from the programs and drops
     * the stale one. */
    KT_REQUIRE_OK(pf_prepare(&r.o, &r.in, NULL, NULL, &r.ps));
    KT_CHECK_EQ(r.ps.binaries_stale, 1);
    KT_CHECK_EQ(r.ps.binaries_stale_dropped, 1);
    KT_CHECK_EQ(r.ps.pipelines_built, 3);
    KT_CHECK_EQ(r.ps.binaries_kept, 3);
    KT_CHECK_EQ(r.ps.cached, 3); /* the programs were kept */

    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK_EQ(s.binaries_stale, 0);
    KT_CHECK_EQ(s.from_binaries, 3);
    KT_CHECK_EQ(s.compiled, 0);
    KT_CHECK_EQ(atomic_load(&r.f.mismatches), 0);

    /* Another update, and a start asked to rebuild: it drops the stale
     * folder and keeps what it builds. */
    r.f.global = 0x53;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, true, false, &s));
    KT_CHECK_EQ(s.binaries_stale, 1);
    KT_CHECK_EQ(s.binaries_stale_dropped, 1);
    KT_CHECK_EQ(s.from_binaries, 0);
    KT_CHECK_EQ(s.binaries_kept, 3);
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK_EQ(s.from_binaries, 3);
    kiln__bin_test_provider = NULL;
}

/* Drops the least recently used program (all used today: the earliest
 * in the file) from the program cache, as kiln cache prune --max-size. */
static void prune_one_program(const char *cache)
{
    struct kiln_cache_options co = {.size = sizeof(co), .flags = KILN_CACHE_KEEP_STAMP};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(cache, &co, &c));
    bin_prune_one(c);
    kiln_cache_close(c);
}

KT_CASE(fake_pruned_program_swept)
{
    pf_need_vulkan();
    struct faked r;
    KT_REQUIRE(faked_prepare(&r, 0x61));
    KT_CHECK_EQ(r.ps.binaries_kept, 3);
    KT_CHECK_EQ(r.ps.binaries_swept, 0);

    /* Negative control: every program there, the start drops nothing. */
    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK_EQ(s.binaries_swept, 0);
    KT_CHECK_EQ(s.from_binaries, 3);

    /* A program pruned: a read-only start sweeps nothing (it cannot hold
     * the programs still), the next start drops its binaries and makes
     * the two left from theirs. */
    prune_one_program(r.cache);
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, true, &s));
    KT_CHECK_EQ(s.binaries_swept, 0);
    KT_CHECK_EQ(s.binaries_records, 3);
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK_EQ(s.binaries_swept, 1);
    KT_CHECK_EQ(s.binaries_records, 2);
    KT_CHECK_EQ(s.pipelines_built, 2);
    KT_CHECK_EQ(s.from_binaries, 2);
    KT_CHECK_EQ(s.compiled, 0);
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK_EQ(s.binaries_swept, 0);

    /* Pruned again: a prepare sweeps before its builds, after its stores,
     * so the program it makes again keeps the binaries it had (the same
     * program, the same driver), and the one pruned before comes back. */
    prune_one_program(r.cache);
    KT_REQUIRE_OK(pf_prepare(&r.o, &r.in, NULL, NULL, &r.ps));
    KT_CHECK_EQ(r.ps.cached, 1);
    KT_CHECK_EQ(r.ps.binaries_swept, 0);
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK_EQ(s.binaries_swept, 0);
    KT_CHECK_EQ(s.pipelines_built, 3);

    /* Binaries of a program the r.cache never had: the prepare drops them. */
    struct kiln__bin_tier_options to = {.cache_dir = r.cache, .provider = &r.f.p};
    struct kiln__bin_tier *t = NULL;
    KT_REQUIRE_OK(kiln__bin_tier_open(&to, &t));
    KT_CHECK_OK(kiln__bin_tier_keep(t, (struct kiln_key){77, 77}, NULL));
    kiln__bin_tier_close(t);
    KT_REQUIRE_OK(pf_prepare(&r.o, &r.in, NULL, NULL, &r.ps));
    KT_CHECK_EQ(r.ps.binaries_swept, 1);
    KT_CHECK_EQ(r.ps.binaries_records, 3);
    KT_CHECK_EQ(atomic_load(&r.f.mismatches), 0);
    kiln__bin_test_provider = NULL;
}

struct lines {
    _Atomic unsigned binaries_warnings;
};

static void count_lines(void *user, enum kiln_log_level level, const char *module, const char *line)
{
    struct lines *l = user;
    (void)module;
    if (level == KILN_LOG_WARN && strstr(line, "driver binaries"))
        atomic_fetch_add(&l->binaries_warnings, 1);
}

/* Whether the device kiln picks offers the real tier (then the fallback
 * cannot be seen on it): asked as a prepare with the tier on asks, with
 * the extension among the context's extra ones (a context made without it
 * never has the tier). */
static bool device_has_binaries(char *why, size_t cap)
{
    static const char *const ext[] = {"VK_KHR_pipeline_binary"};
    struct kiln_vk_options opt = {
        .size = sizeof(opt), .extra_extensions = ext, .extra_extension_count = 1};
    struct kiln_vk *vk = pf_vk_with(&opt);
    struct kiln__bin_provider p;
    bool has = vk && kiln__vk_binary_provider(vk, &p, why, cap) == KILN_OK;
    kiln_vk_destroy(vk);
    return has;
}

/* Ends the case as skipped (one line, exit 77) where the device kiln picks
 * has no tier; else the cases after it use the device's own provider. */
static void need_device_tier(void)
{
    pf_need_vulkan();
    char why[256] = "";
    if (!device_has_binaries(why, sizeof(why))) {
        printf("skipped: %s\n", why);
        exit(77);
    }
    kiln__bin_test_provider = NULL;
}

KT_CASE(on_without_extension_falls_back)
{
    pf_need_vulkan();
    char why[256];
    if (device_has_binaries(why, sizeof(why))) {
        printf("skipped: the device offers VK_KHR_pipeline_binary\n");
        exit(77);
    }
    kiln__bin_test_provider = NULL;
    char cache[4200], vkc[4300];
    struct kiln_prepare_options o;
    struct pf_input in;
    three_generated(cache, sizeof(cache), &o, &in, KILN_BINARIES_ON);
    struct lines l = {0};
    kiln_log_set_sink(count_lines, &l);
    struct kiln_prepare_summary ps = KILN_PREPARE_SUMMARY_INIT;
    int rc = pf_prepare(&o, &in, NULL, NULL, &ps);
    kiln_log_set_sink(NULL, NULL);
    KT_REQUIRE_OK(rc);
    KT_CHECK(!ps.binaries_used);
    KT_CHECK_EQ(ps.pipelines_built, 3);
    KT_CHECK_EQ(atomic_load(&l.binaries_warnings), 1); /* one line for the run */
    snprintf(vkc, sizeof(vkc), "%s/%s", cache, KILN_VK_CACHE_FILE);
    struct stat st;
    KT_CHECK(stat(vkc, &st) == 0 && st.st_size > 0);
    char bins[4300];
    snprintf(bins, sizeof(bins), "%s/binaries", cache);
    KT_CHECK(stat(bins, &st) != 0); /* no tier made */

    /* auto says nothing at warning level; the start is pipelines.vkc's. */
    struct kiln_start_summary s;
    kiln_log_set_sink(count_lines, &l);
    rc = start(cache, KILN_BINARIES_AUTO, false, false, &s);
    kiln_log_set_sink(NULL, NULL);
    KT_REQUIRE_OK(rc);
    KT_CHECK_EQ(atomic_load(&l.binaries_warnings), 1);
    KT_CHECK(!s.binaries_used);
    KT_CHECK_EQ(s.vk_cache_state, KILN_VK_CACHE_LOADED);
    KT_CHECK_EQ(s.pipelines_built, 3);
    KT_CHECK_EQ(s.from_binaries, 0);
}

/* A Fossilize archive of ARCHIVE_COMPUTE + ARCHIVE_GRAPHICS whole pipelines
 * in the case's folder, prepared into its cache with the tier `binaries`. */
#define ARCHIVE_COMPUTE  3
#define ARCHIVE_GRAPHICS 2
#define ARCHIVE_PIPES    (ARCHIVE_COMPUTE + ARCHIVE_GRAPHICS)

/* Prepares the archive at `archive` into the case's cache with the tier
 * `binaries`, as kiln prepare --corpus FILE.foz reads it: whole pipelines. */
static int prepare_archive(struct faked *r, const char *archive, uint32_t binaries)
{
    snprintf(r->cache, sizeof(r->cache), "%s/cache", kt_case_dir());
    pf_options(&r->o, r->cache, 2);
    r->o.binaries = binaries;
    r->ps = (struct kiln_prepare_summary)KILN_PREPARE_SUMMARY_INIT;
    const char *paths[] = {archive};
    struct kiln_foz_pipelines *fp = NULL;
    int rc = kiln_foz_pipelines_open(paths, 1, &fp);
    if (rc < 0)
        return rc;
    struct kiln_program_source src;
    kiln_foz_pipelines_source(fp, &src);
    r->o.source = &src;
    rc = kiln_prepare(&r->o, NULL, NULL, &r->ps);
    r->o.source = NULL;
    kiln_foz_pipelines_destroy(fp);
    return rc;
}

static int archive_prepare(struct faked *r, char *archive, size_t cap, uint32_t binaries)
{
    snprintf(archive, cap, "%s/app.foz", kt_case_dir());
    FW_NEED(fw_write_pipelines(archive, ARCHIVE_COMPUTE, ARCHIVE_GRAPHICS, 0x7000));
    return prepare_archive(r, archive, binaries);
}

/* archive_prepare with the fake provider (bin_fake.h) of `seed` in place
 * of the driver's. */
static int fake_archive_prepare(struct faked *r, uint8_t seed, char *archive, size_t cap,
                                uint32_t binaries)
{
    bin_fake_init(&r->f, seed);
    kiln__bin_test_provider = &r->f.p;
    return archive_prepare(r, archive, cap, binaries);
}

/* An archive's pipelines (the Fossilize builder's) are captured by a
 * prepare with the tier on and made from their binaries by a start: every
 * one handed to "the driver" (the fake's bind) exactly as captured. */
KT_CASE(fake_archive_prepare_then_start)
{
    pf_need_vulkan();
    struct faked r;
    char archive[4200];
    KT_REQUIRE_OK(fake_archive_prepare(&r, 0x61, archive, sizeof(archive), KILN_BINARIES_ON));
    KT_CHECK(r.ps.binaries_used);
    KT_CHECK_EQ(r.ps.kinds[KILN_STATE_FOZ].built, ARCHIVE_PIPES);
    KT_CHECK_EQ(r.ps.pipelines_failed, 0);
    KT_CHECK_EQ(r.ps.binaries_kept, ARCHIVE_PIPES);
    KT_CHECK_EQ(atomic_load(&r.f.captures), ARCHIVE_PIPES);
    KT_CHECK_EQ(atomic_load(&r.f.binds), 0);

    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK(s.binaries_used);
    KT_CHECK_EQ(s.kinds[KILN_STATE_FOZ].built, ARCHIVE_PIPES);
    KT_CHECK_EQ(s.from_binaries, ARCHIVE_PIPES);
    KT_CHECK_EQ(s.compiled, 0);
    KT_CHECK_EQ(s.binaries_kept, 0);
    KT_CHECK_EQ(s.binaries_records, ARCHIVE_PIPES);
    KT_CHECK_EQ(atomic_load(&r.f.binds), ARCHIVE_PIPES);
    KT_CHECK_EQ(atomic_load(&r.f.mismatches), 0);

    /* The same cache with the tier off: nothing from binaries. */
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_OFF, false, false, &s));
    KT_CHECK(!s.binaries_used);
    KT_CHECK_EQ(s.kinds[KILN_STATE_FOZ].built, ARCHIVE_PIPES);
    KT_CHECK_EQ(s.from_binaries, 0);
    KT_CHECK_EQ(atomic_load(&r.f.binds), ARCHIVE_PIPES);
    kiln__bin_test_provider = NULL;
}

/* The negative control: the same archive prepared with the tier off
 * captures nothing and makes no tier folder; a start with it on then
 * builds every pipeline from SPIR-V and keeps their binaries. */
KT_CASE(fake_archive_off_stays_empty)
{
    pf_need_vulkan();
    struct faked r;
    char archive[4200], dir[4300];
    KT_REQUIRE_OK(fake_archive_prepare(&r, 0x62, archive, sizeof(archive), KILN_BINARIES_OFF));
    KT_CHECK(!r.ps.binaries_used);
    KT_CHECK_EQ(r.ps.kinds[KILN_STATE_FOZ].built, ARCHIVE_PIPES);
    KT_CHECK_EQ(r.ps.binaries_kept, 0);
    KT_CHECK_EQ(atomic_load(&r.f.captures), 0);
    snprintf(dir, sizeof(dir), "%s/binaries", r.cache);
    struct stat st;
    KT_CHECK(stat(dir, &st) != 0);

    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK(s.binaries_used);
    KT_CHECK_EQ(s.kinds[KILN_STATE_FOZ].built, ARCHIVE_PIPES);
    KT_CHECK_EQ(s.from_binaries, 0);
    KT_CHECK_EQ(s.binaries_kept, ARCHIVE_PIPES);
    KT_CHECK_EQ(atomic_load(&r.f.binds), 0);
    kiln__bin_test_provider = NULL;
}

/* An archive pipeline's tier record that is not binaries (its checksum
 * holds, the parse refuses it) is never handed to "the driver": the start
 * builds it from its SPIR-V through the Fossilize builder, as before. */
KT_CASE(fake_archive_damaged_from_spirv)
{
    pf_need_vulkan();
    struct faked r;
    char archive[4200];
    KT_REQUIRE_OK(fake_archive_prepare(&r, 0x63, archive, sizeof(archive), KILN_BINARIES_ON));
    KT_REQUIRE(r.ps.binaries_kept == ARCHIVE_PIPES);

    struct kiln_cache_options co = {.size = sizeof(co), .stamp = 0x4b4c4e42u};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(r.ps.binaries_dir, &co, &c));
    struct kiln_cache_entry *all = NULL;
    size_t n = 0;
    KT_REQUIRE_OK(kiln_cache_entries(c, &all, &n));
    KT_REQUIRE(n == ARCHIVE_PIPES);
    for (size_t i = 0; i < n; i++)
        KT_CHECK_OK(kiln_cache_put(c, all[i].key, "nonsense", 8, 8, 0, 0));
    kiln_cache_entries_free(all);
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);

    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, true, &s));
    KT_CHECK_EQ(s.binaries_damaged, ARCHIVE_PIPES);
    KT_CHECK_EQ(s.from_binaries, 0);
    KT_CHECK_EQ(s.kinds[KILN_STATE_FOZ].built, ARCHIVE_PIPES);
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK_EQ(atomic_load(&r.f.binds), 0);
    KT_CHECK_EQ(atomic_load(&r.f.creates), 0);
    kiln__bin_test_provider = NULL;
}

/* Every record of `cache` requested from a pipeline service with the tier
 * `binaries` (by key, read from the cache); *st gets the service's stats,
 * *ready the requests answered READY. */
static void service_on(const char *cache, uint64_t stamp, uint32_t binaries, bool writable,
                       struct kiln_service_stats *st, unsigned *ready)
{
    struct kiln_cache_options co = {.size = sizeof(co),
                                    .stamp = stamp,
                                    .flags = (writable ? 0 : KILN_CACHE_READ_ONLY) |
                                             KILN_CACHE_USE_DICT};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(cache, &co, &c));
    struct kiln_cache_entry *all = NULL;
    size_t n = 0;
    KT_REQUIRE_OK(kiln_cache_entries(c, &all, &n));
    struct kiln_vk *vk = pf_vk(NULL);
    struct kiln_service_options o = KILN_SERVICE_OPTIONS_INIT;
    o.vk = vk;
    o.cache = c;
    o.workers = 2;
    o.binaries = binaries;
    struct kiln_service *svc = NULL;
    KT_REQUIRE_OK(kiln_service_create(&o, &svc));
    *ready = 0;
    for (size_t i = 0; i < n; i++) {
        struct kiln_pipeline_request rq = KILN_PIPELINE_REQUEST_INIT;
        rq.key = all[i].key;
        struct kiln_ticket *t = NULL;
        KT_REQUIRE_OK(kiln_service_request(svc, &rq, &t));
        struct kiln_ticket_info ti = KILN_TICKET_INFO_INIT;
        *ready += kiln_ticket_wait(t, UINT64_MAX, &ti) == KILN_TICKET_READY;
        kiln_ticket_release(t);
    }
    *st = (struct kiln_service_stats)KILN_SERVICE_STATS_INIT;
    KT_CHECK_OK(kiln_service_get_stats(svc, st));
    kiln_service_destroy(svc);
    kiln_vk_destroy(vk);
    kiln_cache_entries_free(all);
    kiln_cache_close(c);
}

/* service_on with a read-only cache. */
static void service_all(const char *cache, uint64_t stamp, uint32_t binaries,
                        struct kiln_service_stats *st, unsigned *ready)
{
    service_on(cache, stamp, binaries, false, st, ready);
}

/* The pipeline service reads the tier: an archive's pipelines, prepared
 * with it on, are made from their binaries when requested by key; with
 * the service's tier off (the negative control) none is. */
KT_CASE(fake_archive_service_reads_tier)
{
    pf_need_vulkan();
    struct faked r;
    char archive[4200];
    KT_REQUIRE_OK(fake_archive_prepare(&r, 0x64, archive, sizeof(archive), KILN_BINARIES_ON));
    KT_REQUIRE(r.ps.binaries_kept == ARCHIVE_PIPES);

    struct kiln_service_stats st;
    unsigned ready = 0;
    service_all(r.cache, r.ps.stamp, KILN_BINARIES_OFF, &st, &ready);
    KT_CHECK_EQ(ready, ARCHIVE_PIPES);
    KT_CHECK_EQ(st.from_binaries, 0);
    KT_CHECK_EQ(atomic_load(&r.f.binds), 0);

    service_all(r.cache, r.ps.stamp, KILN_BINARIES_ON, &st, &ready);
    KT_CHECK_EQ(ready, ARCHIVE_PIPES);
    KT_CHECK_EQ(st.from_binaries, ARCHIVE_PIPES);
    KT_CHECK_EQ(st.failed, 0);
    KT_CHECK_EQ(atomic_load(&r.f.binds), ARCHIVE_PIPES);
    KT_CHECK_EQ(atomic_load(&r.f.mismatches), 0);
    KT_CHECK_EQ(atomic_load(&r.f.captures), ARCHIVE_PIPES); /* the prepare's: none since */
    kiln__bin_test_provider = NULL;
}

/* The pipeline service keeps what it compiles: programs prepared with the
 * tier off (and their pipelines.vkc removed, so the service's probes miss
 * and it compiles each), asked of a service whose cache takes puts, have
 * their binaries captured and kept, and the next start makes every one
 * from them. Control: the same service on the cache read-only keeps none,
 * and that start compiles them all. */
static void service_keeps_case(bool writable, bool archive)
{
    pf_need_vulkan();
    struct faked r;
    unsigned n = archive ? ARCHIVE_PIPES : 3;
    if (archive) {
        char path[4200];
        KT_REQUIRE_OK(fake_archive_prepare(&r, 0x66, path, sizeof(path), KILN_BINARIES_OFF));
    } else {
        bin_fake_init(&r.f, 0x65);
        kiln__bin_test_provider = &r.f.p;
        three_generated(r.cache, sizeof(r.cache), &r.o, &r.in, KILN_BINARIES_OFF);
        r.ps = (struct kiln_prepare_summary)KILN_PREPARE_SUMMARY_INIT;
        KT_REQUIRE_OK(pf_prepare(&r.o, &r.in, NULL, NULL, &r.ps));
    }
    KT_REQUIRE(r.ps.pipelines_built == n && atomic_load(&r.f.captures) == 0);
    char vkc[4300];
    snprintf(vkc, sizeof(vkc), "%s/%s", r.cache, KILN_VK_CACHE_FILE);
    KT_REQUIRE(remove(vkc) == 0);

    struct kiln_service_stats st;
    unsigned ready = 0;
    service_on(r.cache, r.ps.stamp, KILN_BINARIES_ON, writable, &st, &ready);
    KT_CHECK_EQ(ready, n);
    KT_CHECK_EQ(st.failed, 0);
    KT_CHECK_EQ(st.from_binaries, 0);
    KT_CHECK_EQ(st.binaries_kept, writable ? n : 0);
    KT_CHECK_EQ(atomic_load(&r.f.captures), writable ? n : 0);

    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, true, &s));
    KT_CHECK_EQ(s.pipelines_built, n);
    KT_CHECK_EQ(s.from_binaries, writable ? n : 0);
    KT_CHECK_EQ(s.compiled, writable ? 0 : n);
    KT_CHECK_EQ(atomic_load(&r.f.mismatches), 0);
    kiln__bin_test_provider = NULL;
}

KT_CASE(fake_service_keeps_binaries)
{
    service_keeps_case(true, false);
}

KT_CASE(fake_service_read_only_keeps_none)
{
    service_keeps_case(false, false);
}

/* The same for an archive's pipelines, through the Fossilize builder. */
KT_CASE(fake_archive_service_keeps_binaries)
{
    service_keeps_case(true, true);
}

/* The isolation options of the cases below: two workers with the fake
 * provider of byte `global` (bin_fake_worker.c). */
static struct kiln_isolate_options *fake_workers(const char *global)
{
    static const char *argv[3];
    static struct kiln_isolate_options iso;
    argv[0] = KILN_BIN_FAKE_WORKER;
    argv[1] = global;
    argv[2] = NULL;
    iso = (struct kiln_isolate_options){.size = sizeof(iso), .argv = argv, .workers = 2};
    return &iso;
}

/* An isolated prepare keeps the binaries its workers capture: programs
 * prepared with the tier on (the parent's fake of byte 0x69) in workers
 * whose fake is of `worker_global`; the same driver's binaries are kept
 * (the parent's fake captured none itself) and the next start, in one
 * process, makes every pipeline from them, each exactly as the worker
 * captured it. Control: another driver's workers (as if a worker had
 * another device) send binaries the parent leaves out, and the start
 * compiles every pipeline, nothing refused. */
static void isolated_prepare_case(const char *worker_global, unsigned kept)
{
    pf_need_vulkan();
    struct faked r;
    bin_fake_init(&r.f, 0x69);
    kiln__bin_test_provider = &r.f.p;
    three_generated(r.cache, sizeof(r.cache), &r.o, &r.in, KILN_BINARIES_ON);
    r.o.isolate = fake_workers(worker_global);
    r.ps = (struct kiln_prepare_summary)KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&r.o, &r.in, NULL, NULL, &r.ps));
    KT_CHECK(r.ps.isolated_workers >= 1);
    KT_CHECK_EQ(r.ps.pipelines_built, 3);
    KT_CHECK_EQ(r.ps.binaries_kept, kept);
    KT_CHECK_EQ(atomic_load(&r.f.captures), 0); /* the workers captured */

    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, true, &s));
    KT_CHECK_EQ(s.pipelines_built, 3);
    KT_CHECK_EQ(s.from_binaries, kept);
    KT_CHECK_EQ(s.compiled, 3 - kept);
    KT_CHECK_EQ(atomic_load(&r.f.mismatches), 0);
    kiln__bin_test_provider = NULL;
}

KT_CASE(fake_isolated_prepare_keeps_binaries)
{
    isolated_prepare_case("0x69", 3);
}

KT_CASE(fake_isolated_prepare_other_driver)
{
    isolated_prepare_case("0x6a", 0);
}

/* An isolated start makes its pipelines from the tier in its workers:
 * programs prepared with the tier on (the fake of byte 0x67), then a
 * start whose workers (bin_fake_worker) read the tier with the fake of
 * `worker_global`: the same driver makes every one from its binaries,
 * another driver's worker (the control) finds no binaries of its own and
 * compiles them all. */
static void isolated_start_case(const char *worker_global, unsigned from_binaries)
{
    pf_need_vulkan();
    struct faked r;
    KT_REQUIRE(faked_prepare(&r, 0x67));
    KT_REQUIRE(r.ps.binaries_kept == 3);
    struct kiln_start_options so = KILN_START_OPTIONS_INIT;
    so.cache_dir = r.cache;
    so.any_stamp = true;
    so.jobs = 2;
    so.binaries = KILN_BINARIES_ON;
    so.read_only = true;
    so.isolate = fake_workers(worker_global);
    struct kiln_start_summary s = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &s));
    KT_CHECK(s.isolated_workers >= 1);
    KT_CHECK(s.binaries_used);
    KT_CHECK_EQ(s.pipelines_built, 3);
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK_EQ(s.from_binaries, from_binaries);
    KT_CHECK_EQ(s.compiled, 3 - from_binaries);
    kiln__bin_test_provider = NULL;
}

KT_CASE(fake_isolated_start_from_binaries)
{
    isolated_start_case("0x67", 3);
}

KT_CASE(fake_isolated_start_other_driver)
{
    isolated_start_case("0x68", 0);
}

/* The real provider: the device's binaries captured by a prepare, and a
 * start that makes every pipeline from them. */
KT_CASE(tier)
{
    need_device_tier();
    char cache[4200];
    struct kiln_prepare_options o;
    struct pf_input in;
    three_generated(cache, sizeof(cache), &o, &in, KILN_BINARIES_ON);
    struct kiln_prepare_summary ps = KILN_PREPARE_SUMMARY_INIT;
    KT_REQUIRE_OK(pf_prepare(&o, &in, NULL, NULL, &ps));
    KT_CHECK(ps.binaries_used);
    KT_CHECK_EQ(ps.binaries_kept, ps.pipelines_built);
    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK(s.binaries_used);
    KT_CHECK_EQ(s.from_binaries, ps.pipelines_built);
    KT_CHECK_EQ(s.compiled, 0);
    KT_CHECK_EQ(s.binaries_damaged, 0);

    /* An archive's pipelines, through the Fossilize builder. */
    struct faked r;
    char archive[4200];
    KT_REQUIRE_OK(archive_prepare(&r, archive, sizeof(archive), KILN_BINARIES_ON));
    KT_CHECK(r.ps.binaries_used);
    KT_CHECK_EQ(r.ps.binaries_kept, r.ps.pipelines_built);
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK_EQ(s.from_binaries, r.ps.pipelines_built);
    KT_CHECK_EQ(s.compiled, 0);
    KT_CHECK_EQ(s.binaries_damaged, 0);
}

/* Ray tracing on the device's own tier: of fw_write_raytracing's three
 * pipelines, the whole one is captured and made from its binaries; the
 * library and the pipeline linking it keep the pipeline cache (the tier
 * takes no library and no link). Skips where the device has no tier or
 * no ray tracing. */
KT_CASE(tier_raytracing)
{
    need_device_tier();
    char archive[4200];
    snprintf(archive, sizeof(archive), "%s/rt.foz", kt_case_dir());
    FW_NEED(fw_write_raytracing(archive, 0x9000));
    struct faked r;
    KT_REQUIRE_OK(prepare_archive(&r, archive, KILN_BINARIES_ON));
    const struct kiln_kind_counts *k = &r.ps.kinds[KILN_STATE_FOZ];
    if (k->skipped == 3) {
        printf("skipped: %s\n", k->skip_reason);
        exit(77);
    }
    KT_CHECK(r.ps.binaries_used);
    KT_CHECK_EQ(k->built, 3);
    KT_CHECK_EQ(r.ps.pipelines_failed, 0);
    KT_CHECK_EQ(r.ps.binaries_kept, 1);

    struct kiln_start_summary s;
    KT_REQUIRE_OK(start(r.cache, KILN_BINARIES_ON, false, false, &s));
    KT_CHECK(s.binaries_used);
    KT_CHECK_EQ(s.kinds[KILN_STATE_FOZ].built, 3);
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK_EQ(s.from_binaries, 1);
    KT_CHECK_EQ(s.binaries_damaged, 0);
}

KT_MAIN(KT_ENTRY(fake_prepare_then_start), KT_ENTRY(fake_stale_key_rebuilds),
        KT_ENTRY(fake_pruned_program_swept), KT_ENTRY(on_without_extension_falls_back),
        KT_ENTRY(fake_archive_prepare_then_start), KT_ENTRY(fake_archive_off_stays_empty),
        KT_ENTRY(fake_archive_damaged_from_spirv), KT_ENTRY(fake_archive_service_reads_tier),
        KT_ENTRY(fake_service_keeps_binaries), KT_ENTRY(fake_service_read_only_keeps_none),
        KT_ENTRY(fake_archive_service_keeps_binaries), KT_ENTRY(fake_isolated_start_from_binaries),
        KT_ENTRY(fake_isolated_prepare_keeps_binaries),
        KT_ENTRY(fake_isolated_prepare_other_driver), KT_ENTRY(fake_isolated_start_other_driver),
        KT_ENTRY(tier), KT_ENTRY(tier_raytracing))

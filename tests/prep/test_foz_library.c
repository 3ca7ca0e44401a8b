/*
 * test_foz_library.c - Fossilize through libkiln alone, as an emulator
 * embeds it: an archive imported in-process (kiln_foz_pipelines_open and
 * kiln_foz_pipelines_import), then a warm start given no builder builds
 * every imported pipeline on lavapipe (the core's Fossilize builder is the
 * default for KILN_STATE_FOZ; an application's own builder of that kind
 * still wins); the archive replayed in-process (kiln_foz_replay) on kiln's
 * device and on the application's own (a context over kiln_vk_external),
 * and exported back (kiln_foz_export).
 *
 * The archive is written here (fw_write_pipelines: generated compute and
 * graphics pipelines, needs shaderc); each case skips (exit 77) without
 * Vulkan or shaderc.
 */
#include <vulkan/vulkan.h>

#include "foz_writer.h"
#include "kiln_test.h"
#include "prep_fixture.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define COMPUTE  3
#define GRAPHICS 2

/* Writes the archive into the case's folder and imports it into the cache
 * `cache` there; `archive` gets its path. */
static void import_archive(char *archive, size_t cap, char *cache, size_t ccap)
{
    snprintf(archive, cap, "%s/app.foz", kt_case_dir());
    snprintf(cache, ccap, "%s/cache", kt_case_dir());
    FW_NEED(fw_write_pipelines(archive, COMPUTE, GRAPHICS, 0x4000));
    const char *paths[] = {archive};
    struct kiln_foz_pipelines *fp = NULL;
    KT_REQUIRE_OK(kiln_foz_pipelines_open(paths, 1, &fp));
    KT_REQUIRE(kiln_foz_pipelines_count(fp) == COMPUTE + GRAPHICS);
    struct kiln_cache_options co = {
        .size = sizeof(co), .stamp = KILN_FOZ_STAMP, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(cache, &co, &c));
    struct kiln_foz_pipelines_report rep;
    KT_REQUIRE_OK(kiln_foz_pipelines_import(c, fp, &rep));
    KT_CHECK_EQ(rep.imported[KILN_FOZ_KIND_COMPUTE], COMPUTE);
    KT_CHECK_EQ(rep.imported[KILN_FOZ_KIND_GRAPHICS], GRAPHICS);
    KT_CHECK_EQ(kiln_cache_count(c), COMPUTE + GRAPHICS);
    kiln_cache_close(c);
    kiln_foz_pipelines_destroy(fp);
}

/* An application's builder of KILN_STATE_FOZ: counts its calls, builds
 * nothing (it says the device lacks what is needed). */
struct counting_builder {
    atomic_uint calls;
};

static int count_build(void *user, struct kiln_build_request *req)
{
    struct counting_builder *b = user;
    atomic_fetch_add(&b->calls, 1);
    snprintf(req->why, sizeof(req->why), "the application's builder");
    return KILN_ENOTSUP;
}

/*
 * What `kiln import foz` stores, a warm start through the library builds:
 * no builder given, every imported pipeline built on kiln's device, none
 * skipped; with the application's own builder of that kind, it is the one
 * called.
 */
KT_CASE(warm_start_builds_imported)
{
    KT_REQUIRE(pf_need_vulkan());
    char archive[4200], cache[4200];
    import_archive(archive, sizeof(archive), cache, sizeof(cache));

    struct kiln_vk *vk = pf_vk(NULL);
    struct kiln_start_options so = {
        .size = sizeof(so), .cache_dir = cache, .stamp = KILN_FOZ_STAMP, .jobs = 2, .vk = vk};
    struct kiln_start_summary ss = KILN_START_SUMMARY_INIT;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.loaded, COMPUTE + GRAPHICS);
    KT_CHECK_EQ(ss.bad, 0);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].built, COMPUTE + GRAPHICS);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].skipped, 0);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].failed, 0);
    KT_CHECK_EQ(ss.pipelines_built, COMPUTE + GRAPHICS);
    KT_CHECK_EQ(ss.pipelines_skipped, 0);
    KT_CHECK_EQ(ss.pipelines_failed, 0);

    /* The same on a context kiln makes for the call (vk NULL). */
    so.vk = NULL;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].built, COMPUTE + GRAPHICS);
    KT_CHECK_EQ(ss.pipelines_skipped, 0);

    /* The application's builder of the kind wins over kiln's. */
    struct counting_builder cb = {0};
    struct kiln_builder own = {.size = sizeof(own),
                               .kind = KILN_STATE_FOZ,
                               .user = &cb,
                               .build = count_build,
                               .name = "app-foz"};
    so.vk = vk;
    so.builders = &own;
    so.nbuilders = 1;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(atomic_load(&cb.calls), COMPUTE + GRAPHICS);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].built, 0);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].skipped, COMPUTE + GRAPHICS);
    KT_CHECK(strstr(ss.kinds[KILN_STATE_FOZ].skip_reason, "the application's builder") != NULL);

    /* The core's default joins the caller's builders where prep_abi.c reads
     * them: an array of a newer client's builders (a longer stride, a zero
     * tail) of another kind still gets the Fossilize builder appended. */
    struct newer_builder {
        struct kiln_builder b;
        uint64_t later;
    } app[2];
    memset(app, 0, sizeof(app));
    for (int i = 0; i < 2; i++) {
        app[i].b = own;
        app[i].b.size = sizeof(app[i]);
        app[i].b.kind = KILN_STATE_APP;
    }
    atomic_store(&cb.calls, 0);
    so.builders = &app[0].b;
    so.nbuilders = 2;
    KT_REQUIRE_OK(kiln_warm_start(&so, NULL, NULL, &ss));
    KT_CHECK_EQ(atomic_load(&cb.calls), 0);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].built, COMPUTE + GRAPHICS);
    KT_CHECK_EQ(ss.kinds[KILN_STATE_FOZ].skipped, 0);
    kiln_vk_destroy(vk);
}

/* Replays the archive on `vk` (NULL: kiln's own) and checks every
 * pipeline was built. */
static void replay_on(const char *archive, struct kiln_vk *vk, unsigned workers)
{
    const char *paths[] = {archive};
    struct kiln_foz_replay_options ro = KILN_FOZ_REPLAY_OPTIONS_INIT;
    ro.paths = paths;
    ro.npaths = 1;
    ro.vk = vk;
    ro.workers = workers;
    struct kiln_foz_replay_report rr = KILN_FOZ_REPLAY_REPORT_INIT;
    KT_REQUIRE_OK(kiln_foz_replay(&ro, &rr));
    KT_CHECK_EQ(rr.size, sizeof(rr));
    KT_CHECK_EQ(rr.pipelines, COMPUTE + GRAPHICS);
    KT_CHECK_EQ(rr.found.unique[KILN_FOZ_KIND_COMPUTE], COMPUTE);
    KT_CHECK_EQ(rr.built[KILN_FOZ_KIND_COMPUTE], COMPUTE);
    KT_CHECK_EQ(rr.built[KILN_FOZ_KIND_GRAPHICS], GRAPHICS);
    for (int k = 0; k < KILN_FOZ_KIND_COUNT; k++) {
        KT_CHECK_EQ(rr.skipped[k], 0);
        KT_CHECK_EQ(rr.failed[k], 0);
    }
    KT_CHECK(rr.first_problem[0] == '\0');
}

/*
 * The archive replayed in-process: on kiln's own device, and on the
 * application's own (its instance and device, wrapped by kiln_vk_external,
 * its VkPipelineCache used and left alive).
 */
KT_CASE(replay_own_and_external)
{
    KT_REQUIRE(pf_need_vulkan());
    char archive[4200];
    snprintf(archive, sizeof(archive), "%s/app.foz", kt_case_dir());
    FW_NEED(fw_write_pipelines(archive, COMPUTE, GRAPHICS, 0x5000));
    replay_on(archive, NULL, 1);

    struct pf_own_vulkan v;
    pf_own_vulkan_make(&v);
    size_t before = pf_own_cache_bytes(&v);
    struct kiln_vk_external ext = pf_own_external(&v);
    struct kiln_vk_options vo = {.size = sizeof(vo), .external = &ext};
    struct kiln_vk *vk = NULL;
    KT_REQUIRE_OK(kiln_vk_create(&vo, &vk));
    replay_on(archive, vk, 2);
    kiln_vk_destroy(vk);
    KT_CHECK(pf_own_cache_bytes(&v) >= before); /* still the application's, and alive */
    pf_own_vulkan_destroy(&v);
}

/* Bad input is refused before anything is read or made. */
KT_CASE(replay_refuses)
{
    struct kiln_foz_replay_options ro = KILN_FOZ_REPLAY_OPTIONS_INIT;
    struct kiln_foz_replay_report rr = KILN_FOZ_REPLAY_REPORT_INIT;
    kiln_log_set_level(KILN_LOG_ERROR + 1);
    KT_CHECK_EQ(kiln_foz_replay(&ro, &rr), KILN_EINVAL); /* no archives */
    const char *paths[] = {"/nonexistent/a.foz"};
    ro.paths = paths;
    ro.npaths = 1;
    struct kiln_foz_replay_options zero = {0};
    KT_CHECK_EQ(kiln_foz_replay(&zero, &rr), KILN_EINVAL); /* size 0 */
    struct kiln_foz_replay_report rzero = {0};
    KT_CHECK_EQ(kiln_foz_replay(&ro, &rzero), KILN_EINVAL);
    KT_CHECK(kiln_foz_replay(&ro, &rr) < 0); /* the archive is not there */
    KT_CHECK_EQ(rr.pipelines, 0);
    /* A builder given must be of KILN_STATE_FOZ, with a build function. */
    struct counting_builder cb = {0};
    struct kiln_builder app = {
        .size = sizeof(app), .kind = KILN_STATE_APP, .user = &cb, .build = count_build};
    ro.builder = &app;
    KT_CHECK_EQ(kiln_foz_replay(&ro, &rr), KILN_EINVAL);
    app.kind = KILN_STATE_FOZ;
    app.build = NULL;
    KT_CHECK_EQ(kiln_foz_replay(&ro, &rr), KILN_EINVAL);
    KT_CHECK_EQ(atomic_load(&cb.calls), 0);
    kiln_log_set_level(KILN_LOG_WARN);
}

/* The imported cache exported back is an archive of the same pipelines. */
KT_CASE(export_imported)
{
    char archive[4200], cache[4200], out[4300];
    import_archive(archive, sizeof(archive), cache, sizeof(cache));
    snprintf(out, sizeof(out), "%s/back.foz", kt_case_dir());
    struct kiln_cache_options co = {
        .size = sizeof(co), .stamp = KILN_FOZ_STAMP, .flags = KILN_CACHE_READ_ONLY};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(cache, &co, &c));
    struct kiln_foz_export_report er = KILN_FOZ_EXPORT_REPORT_INIT;
    KT_REQUIRE_OK(kiln_foz_export(c, out, &er));
    kiln_cache_close(c);
    KT_CHECK_EQ(er.foz, COMPUTE + GRAPHICS);
    KT_CHECK_EQ(er.compute, COMPUTE);
    KT_CHECK_EQ(er.graphics, GRAPHICS);
    const char *paths[] = {out};
    struct kiln_foz_pipelines *fp = NULL;
    KT_REQUIRE_OK(kiln_foz_pipelines_open(paths, 1, &fp));
    KT_CHECK_EQ(kiln_foz_pipelines_count(fp), COMPUTE + GRAPHICS);
    kiln_foz_pipelines_destroy(fp);
}

KT_MAIN(KT_ENTRY(warm_start_builds_imported), KT_ENTRY(replay_own_and_external),
        KT_ENTRY(replay_refuses), KT_ENTRY(export_imported))

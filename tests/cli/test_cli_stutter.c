/*
 * test_cli_stutter.c - `kiln bench stutter` on a small set: the structure
 * of its --json report and the invariants of its figures, never their
 * speed (speed is what the bench measures, not what a test asserts).
 *
 * Every mode asked for is there, with and without background builds;
 * a mode's counts agree (the draws of the first use of a pipeline are the
 * pipelines drawn, skipped draws are at most the draws, ready and failed
 * add up to the pipelines); sync skips nothing (the frame thread built
 * what it drew); the fast-link fields are there whether or not the
 * service honours the flag (fast_linked is then 0). A case without a
 * Vulkan device, or without the shared corpus, prints one "skipped:" line
 * and exits 77.
 */
#include "kiln_test.h"
#include "kt_cli.h"

#include <json.h>
#include <stdlib.h>
#include <string.h>

/* Runs the bench with `args`; @return its report (skips without Vulkan). */
static struct json_object *run_stutter(const char *args)
{
    char out[4200], line[8400], err[2048];
    snprintf(out, sizeof(out), "%s/stutter.json", kt_case_dir());
    snprintf(line, sizeof(line), "bench stutter --json --jobs 2 --seed 7 %s", args);
    int rc = kt_cli_run(out, line);
    char errpath[4300];
    snprintf(errpath, sizeof(errpath), "%s.err", out);
    kt_slurp(errpath, err, sizeof(err));
    if (rc != 0 && strstr(err, "no Vulkan context")) {
        printf("skipped: no Vulkan device for kiln (see %s)\n", errpath);
        exit(77);
    }
    struct json_object *o = kt_cli_json(out);
    KT_NEED(rc == 0);
    return o;
}

static uint64_t num(struct json_object *o, const char *key)
{
    uint64_t v = kt_json_num(o, key);
    if (v == UINT64_MAX)
        kt_fail(__FILE__, __LINE__, "no number %s", key);
    return v;
}

/* One mode's invariants. */
static void check_mode(struct json_object *m, uint64_t pipelines, uint64_t frames, bool with_bg)
{
    static const char *const keys[] = {"over_budget",
                                       "over_2x_budget",
                                       "worst_frame_ms",
                                       "frame_p50_ms",
                                       "frame_p99_ms",
                                       "draws",
                                       "draws_new",
                                       "draws_skipped",
                                       "first_draws_skipped",
                                       "pipelines_ready",
                                       "pipelines_failed",
                                       "urgent_wait_p50_ms",
                                       "urgent_wait_p99_ms",
                                       "urgent_wait_p99_frames",
                                       "play_urgent_wait_p50_ms",
                                       "play_urgent_wait_p99_ms",
                                       "play_urgent_wait_p99_frames",
                                       "parts_ahead_asked",
                                       "parts_ahead_refused",
                                       "parts_only_built",
                                       "loading_screen_ms",
                                       "background_holds",
                                       "fast_linked",
                                       "optimized",
                                       "peak_rss_bytes",
                                       "background_built",
                                       "workers"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        num(m, keys[i]);
    const char *mode = json_object_get_string(json_object_object_get(m, "mode"));
    KT_CHECK_EQ(num(m, "frames"), frames);
    KT_CHECK(num(m, "over_2x_budget") <= num(m, "over_budget"));
    KT_CHECK(num(m, "over_budget") <= frames);
    KT_CHECK(num(m, "draws_skipped") <= num(m, "draws"));
    KT_CHECK(num(m, "first_draws_skipped") <= num(m, "draws_skipped"));
    KT_CHECK(num(m, "first_draws_skipped") <= num(m, "draws_new"));
    KT_CHECK_EQ(num(m, "pipelines_ready") + num(m, "pipelines_failed"), pipelines);
    KT_CHECK(num(m, "draws_new") <= pipelines);
    KT_CHECK(num(m, "urgent_wait_p50_ms") <= num(m, "urgent_wait_p99_ms") + 1);
    KT_CHECK(num(m, "play_urgent_wait_p50_ms") <= num(m, "play_urgent_wait_p99_ms") + 1);
    KT_CHECK(num(m, "play_urgent_wait_p99_ms") <= num(m, "urgent_wait_p99_ms") + 1);
    KT_CHECK(num(m, "parts_only_built") <= num(m, "parts_ahead_asked"));
    KT_CHECK(num(m, "peak_rss_bytes") > 0);
    KT_CHECK(json_object_object_get_ex(m, "all_optimized_ms", NULL));
    if (with_bg)
        KT_CHECK(num(m, "background") > 0);
    else
        KT_CHECK_EQ(num(m, "background_built"), 0);
    if (strncmp(mode, "sync", 4) == 0) {
        KT_CHECK_EQ(num(m, "draws_skipped"), 0); /* the frame built what it drew */
        KT_CHECK_EQ(num(m, "fast_linked"), 0);
        KT_CHECK_EQ(num(m, "draws_new"), num(m, "pipelines_ready"));
    }
    if (strncmp(mode, "async", 5) == 0)
        KT_CHECK_EQ(num(m, "fast_linked"), 0);
    /* fastlink: linked answers only where the service and the device have
     * it; each is replaced by an optimized one. */
    if (strncmp(mode, "fastlink", 8) == 0)
        KT_CHECK(num(m, "optimized") <= num(m, "fast_linked"));
}

/* Every mode, with and without background builds, and the rest of the report. */
static void check_report(struct json_object *o, bool warm)
{
    static const char *const want[] = {"sync",     "sync_bg",  "async",
                                       "async_bg", "fastlink", "fastlink_bg"};
    uint64_t pipelines = num(o, "pipelines"), frames = num(o, "frames");
    KT_CHECK(pipelines > 0);
    KT_CHECK_EQ(num(o, "shader_lead_frames"), 0); /* off by default: no parts asked */
    struct json_object *hold = NULL;
    KT_CHECK(json_object_object_get_ex(o, "urgent_hold", &hold) && json_object_get_boolean(hold));
    KT_CHECK(num(o, "last_first_use_frame") < frames);
    struct json_object *modes = NULL;
    KT_NEED(json_object_object_get_ex(o, "modes", &modes));
    KT_CHECK_EQ(json_object_array_length(modes), 6);
    for (size_t i = 0; i < json_object_array_length(modes) && i < 6; i++) {
        struct json_object *m = json_object_array_get_idx(modes, i);
        const char *mode = json_object_get_string(json_object_object_get(m, "mode"));
        KT_CHECK(mode && strcmp(mode, want[i]) == 0);
        check_mode(m, pipelines, frames, i % 2 == 1);
        KT_CHECK_EQ(num(m, "parts_ahead_asked") + num(m, "parts_ahead_refused"), 0);
    }
    struct json_object *ratios = NULL;
    KT_CHECK(json_object_object_get_ex(o, "ratios", &ratios));
    KT_CHECK(json_object_object_get_ex(ratios, "over_budget_sync_vs_async", NULL));
    KT_CHECK(json_object_object_get_ex(ratios, "over_budget_sync_vs_fastlink_bg", NULL));
    if (warm) {
        uint64_t programs = num(o, "warm_compare.programs");
        KT_CHECK(programs > 0);
        KT_CHECK_EQ(num(o, "warm_compare.warm_start_built"), num(o, "warm_compare.service_built"));
        KT_CHECK(num(o, "warm_compare.service_built") <= programs);
        num(o, "seconds.warm_start");
        num(o, "seconds.service_background");
    }
}

/* Generated programs: every mode and the warm-start comparison. */
KT_CASE(generated)
{
    struct json_object *o = run_stutter("--generate 8 --background 2 --frames 60");
    KT_CHECK_EQ(num(o, "pipelines"), 8);
    KT_CHECK_EQ(num(o, "background_programs"), 2);
    check_report(o, true);
    json_object_put(o);
}

/* Two archives of the shared corpus, without the warm-start comparison. */
KT_CASE(archives)
{
    kt_require_corpus("foz/sascha-willems");
    char args[4400];
    const char *d = kt_corpus_dir();
    snprintf(args, sizeof(args),
             "--background 1 --frames 60 --no-warm-compare "
             "'%s/foz/sascha-willems/triangle.f93c6e96adcd7946.1.foz' "
             "'%s/foz/sascha-willems/computenbody.f93c6e96adcd7946.1.foz'",
             d, d);
    struct json_object *o = run_stutter(args);
    KT_CHECK_EQ(num(o, "archives"), 2);
    check_report(o, false);
    struct json_object *w = NULL;
    KT_CHECK(json_object_object_get_ex(o, "warm_compare", &w) && w == NULL);
    json_object_put(o);
}

/* --shader-lead 2: every scheduled pipeline's parts are asked once; the
 * fastlink service takes them where the device has pipeline libraries,
 * sync's (no fast-link) refuses them all; the control is `generated`
 * (lead 0: none asked, none refused). */
KT_CASE(shader_lead)
{
    struct json_object *o = run_stutter("--generate 8 --background 0 --frames 40 "
                                        "--modes sync,fastlink --no-warm-compare --shader-lead 2");
    KT_CHECK_EQ(num(o, "shader_lead_frames"), 2);
    uint64_t pipelines = num(o, "pipelines");
    struct json_object *modes = NULL;
    KT_NEED(json_object_object_get_ex(o, "modes", &modes));
    KT_CHECK_EQ(json_object_array_length(modes), 2);
    for (size_t i = 0; i < json_object_array_length(modes) && i < 2; i++) {
        struct json_object *m = json_object_array_get_idx(modes, i);
        check_mode(m, pipelines, 40, false);
        bool sync = i == 0;
        uint64_t asked = num(m, "parts_ahead_asked"), refused = num(m, "parts_ahead_refused");
        KT_CHECK_EQ(asked + refused, pipelines);
        if (sync)
            KT_CHECK_EQ(asked, 0);
        else if (asked == 0)
            printf("the fastlink service took no parts: no pipeline libraries here\n");
    }
    json_object_put(o);
}

KT_MAIN(KT_ENTRY(generated), KT_ENTRY(archives), KT_ENTRY(shader_lead))

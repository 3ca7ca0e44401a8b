/*
 * test_bench_replay_cli.c - `kiln bench replay` as a user runs it: the
 * built kiln binary, spawned, its exit code and the counts of its --json
 * output. Timings are printed by the bench and never asserted here.
 *
 * The archive every machine has is the committed fuzz seed triangle.foz (a
 * real capture: one graphics pipeline); with the shared corpus, four of its
 * archives run alone and together show that a pipeline found in several
 * archives is replayed once and that every program is accounted for.
 * Under AddressSanitizer the spawned runs get detect_leaks=0, as in
 * test_prepare_cli.c (the loader unloads the driver, so its leaks can no
 * longer be matched by tests/support/lsan.supp).
 */
#include "kiln_test.h"
#include "kt_spawn.h"
#include "prep_fixture.h"

#include <json-c/json.h>
#include <unistd.h>

struct out {
    char text[1 << 17];
    size_t len;
};

/* Runs kiln with `args` (NULL-terminated), stdout into *o, stderr to
 * /dev/null. @return the exit code, or -1. */
static int run_kiln(struct out *o, const char *const *args)
{
    struct kt_spawn r = {.stderr_path = "/dev/null", .out = o->text, .out_cap = sizeof(o->text)};
    int ex = kt_spawn_exit(KILN_CLI, args, &r);
    o->len = r.out_len;
    return ex;
}

static struct json_object *field(struct json_object *j, const char *key)
{
    struct json_object *v = NULL;
    if (!j || !json_object_object_get_ex(j, key, &v))
        kt_fail(__FILE__, __LINE__, "no field '%s' in the JSON", key);
    return v;
}

static int64_t num(struct json_object *j, const char *key)
{
    struct json_object *v = field(j, key);
    return v ? json_object_get_int64(v) : -1;
}

static const char *const kinds[] = {"graphics", "compute", "raytracing"};

/*
 * Checks what every successful report must hold: the thread counts asked
 * for, one run each, every program of every kind built, skipped or failed,
 * and a failure only where kiln_prepare refused to store the program (no
 * build fails on these archives).
 */
static void check_report(struct json_object *j, const unsigned *threads, size_t nthreads)
{
    KT_REQUIRE(j != NULL);
    KT_CHECK(json_object_get_boolean(field(j, "ok")));
    int64_t pipelines = num(j, "pipelines");
    KT_CHECK(pipelines > 0);
    KT_CHECK_EQ(num(j, "pipelines_met"), pipelines + num(j, "duplicates") + num(j, "unreadable"));
    struct json_object *jk = field(j, "kinds");
    int64_t per_kind[3];
    int64_t sum = 0;
    for (size_t k = 0; k < 3; k++)
        sum += per_kind[k] = num(jk, kinds[k]);
    KT_CHECK_EQ(sum, pipelines);
#if defined(__linux__)
    /* Linux resets each count's peak (clear_refs). */
    KT_CHECK(strcmp(json_object_get_string(field(j, "peak_rss_method")), "clear_refs") == 0);
#endif
    struct json_object *runs = field(j, "runs");
    KT_REQUIRE(runs && json_object_array_length(runs) == nthreads);
    KT_CHECK_EQ(json_object_array_length(field(j, "builds_per_s")), nthreads);
    KT_CHECK_EQ(json_object_array_length(field(j, "peak_rss_bytes")), nthreads);
    struct json_object *speedup = field(j, "speedup");
    KT_REQUIRE(speedup && json_object_array_length(speedup) == nthreads);
    struct json_object *secs = field(j, "seconds");
    KT_CHECK(json_object_object_get_ex(secs, "read", NULL));
    for (size_t i = 0; i < nthreads; i++) {
        struct json_object *r = json_object_array_get_idx(runs, i);
        KT_CHECK_EQ(num(r, "threads"), threads[i]);
        KT_CHECK_EQ(num(r, "workers"), threads[i]);
        int64_t built = num(r, "built"), skipped = num(r, "skipped"), failed = num(r, "failed");
        KT_CHECK_EQ(built + skipped + failed, pipelines);
        KT_CHECK(built > 0);
        KT_CHECK_EQ(failed, num(r, "not_stored"));
        KT_CHECK_EQ(num(r, "build_failed"), 0);
        /* A fresh cache folder: the ledger answers nothing, every build compiles. */
        KT_CHECK_EQ(num(r, "driver_compiles"), built);
        int64_t kb = 0, ks = 0;
        for (size_t k = 0; k < 3; k++) {
            struct json_object *c = field(r, kinds[k]);
            KT_CHECK_EQ(num(c, "built") + num(c, "skipped") + num(c, "failed"), per_kind[k]);
            kb += num(c, "built");
            ks += num(c, "skipped");
        }
        KT_CHECK_EQ(kb, built);
        KT_CHECK_EQ(ks, skipped);
        /* The peak is this count's own process's: above what it started at. */
        KT_CHECK(num(r, "peak_rss_bytes") > num(r, "start_rss_bytes"));
        char phase[32];
        snprintf(phase, sizeof(phase), "pipelines_%ut", threads[i]);
        KT_CHECK(json_object_object_get_ex(secs, phase, NULL));
        /* A speedup is there exactly when 1 thread was measured. */
        KT_CHECK_EQ(json_object_is_type(json_object_array_get_idx(speedup, i), json_type_null),
                    threads[0] != 1);
    }
}

/* ---- cases ------------------------------------------------------------------ */

KT_CASE(usage)
{
    struct out o;
    const char *tri = KILN_SOURCE_DIR "/fuzz/corpus/foz/triangle.foz";
    const char *bad = KILN_SOURCE_DIR "/fuzz/corpus/foz/bad-magic.foz";
    KT_CHECK_EQ(run_kiln(&o, (const char *[]){"bench", "replay", "--help", NULL}), 0);
    KT_CHECK(strstr(o.text, "usage:") != NULL);
    KT_CHECK_EQ(run_kiln(&o, (const char *[]){"bench", "replay", NULL}), 2);
    KT_CHECK_EQ(run_kiln(&o, (const char *[]){"bench", "replay", "--threads", "0", tri, NULL}), 2);
    KT_CHECK_EQ(run_kiln(&o, (const char *[]){"bench", "replay", "--threads", "1,x", tri, NULL}),
                2);
    KT_CHECK_EQ(run_kiln(&o, (const char *[]){"bench", "replay", "--generate", "3", tri, NULL}), 2);
    KT_CHECK_EQ(run_kiln(&o, (const char *[]){"bench", "replay", "--seed", "1", tri, NULL}), 2);
    KT_CHECK_EQ(
        run_kiln(&o, (const char *[]){"bench", "replay", "--memory-budget", "0", tri, NULL}), 2);
    KT_CHECK_EQ(
        run_kiln(&o, (const char *[]){"bench", "replay", "--memory-budget", "lots", tri, NULL}), 2);
    KT_CHECK_EQ(o.len, 0); /* errors go to stderr */
    /* A file that is not an archive, and one that is not there: bad input. */
    KT_CHECK_EQ(run_kiln(&o, (const char *[]){"bench", "replay", bad, NULL}), 2);
    KT_CHECK_EQ(run_kiln(&o, (const char *[]){"bench", "replay", "--json", "/nowhere/x.foz", NULL}),
                2);
    struct json_object *j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK(!json_object_get_boolean(field(j, "ok")));
    json_object_put(j);
}

/* The committed archive at 1 and 2 threads: its one graphics pipeline built
 * in each count's run. */
KT_CASE(triangle_json)
{
    pf_need_vulkan();
    struct out o;
    const char *tri = KILN_SOURCE_DIR "/fuzz/corpus/foz/triangle.foz";
    KT_REQUIRE(run_kiln(&o, (const char *[]){"bench", "replay", "--threads", "1,2", "--json", tri,
                                             NULL}) == 0);
    struct json_object *j = json_tokener_parse(o.text);
    static const unsigned threads[] = {1, 2};
    check_report(j, threads, 2);
    KT_CHECK_EQ(num(j, "archives"), 1);
    KT_CHECK_EQ(num(j, "pipelines"), 1);
    KT_CHECK_EQ(num(field(j, "kinds"), "graphics"), 1);
    struct json_object *runs = field(j, "runs");
    for (size_t i = 0; i < 2; i++) {
        struct json_object *r = json_object_array_get_idx(runs, i);
        KT_CHECK_EQ(num(field(r, "graphics"), "built"), 1);
        KT_CHECK_EQ(num(r, "failed"), 0);
    }
    KT_CHECK(json_object_is_type(field(j, "archive"), json_type_null));
    json_object_put(j);
}

/* --memory-budget: each count runs twice, plain and bounded, both
 * reported in full; a budget far above the peak keeps every run within it. */
KT_CASE(memory_budget_json)
{
    pf_need_vulkan();
    struct out o;
    const char *tri = KILN_SOURCE_DIR "/fuzz/corpus/foz/triangle.foz";
    KT_REQUIRE(run_kiln(&o, (const char *[]){"bench", "replay", "--threads", "1", "--memory-budget",
                                             "64G", "--json", tri, NULL}) == 0);
    struct json_object *j = json_tokener_parse(o.text);
    static const unsigned one[] = {1};
    check_report(j, one, 1);
    KT_CHECK_EQ(num(j, "memory_budget_bytes"), INT64_C(64) << 30);
    struct json_object *bounded = field(j, "bounded_runs");
    KT_REQUIRE(bounded && json_object_array_length(bounded) == 1);
    struct json_object *r = json_object_array_get_idx(bounded, 0);
    KT_CHECK_EQ(num(r, "built"), 1);
    KT_CHECK_EQ(num(r, "driver_compiles"), 1);
    KT_CHECK_EQ(num(r, "memory_budget_bytes"), INT64_C(64) << 30);
    KT_CHECK(json_object_get_boolean(field(r, "within_budget")));
    KT_CHECK(json_object_get_boolean(field(r, "reachable")));
    KT_CHECK(num(r, "base_bytes") > 0);
    KT_CHECK_EQ(json_object_array_length(field(j, "bounded_vs_plain")), 1);
    KT_CHECK(json_object_object_get_ex(field(j, "seconds"), "pipelines_1t_bounded", NULL));
    /* The plain run has no budget. */
    r = json_object_array_get_idx(field(j, "runs"), 0);
    KT_CHECK(json_object_is_type(field(r, "memory_budget_bytes"), json_type_null));
    json_object_put(j);
}

/* A budget at or under what kiln holds before its first build (the device,
 * the archive) is reported unreachable, not merely exceeded; one above it
 * is reachable, in the run and in "budgets". */
KT_CASE(memory_budget_unreachable)
{
    pf_need_vulkan();
    struct out o;
    const char *tri = KILN_SOURCE_DIR "/fuzz/corpus/foz/triangle.foz";
    KT_REQUIRE(run_kiln(&o, (const char *[]){"bench", "replay", "--threads", "1", "--memory-budget",
                                             "1M,64G", "--json", tri, NULL}) == 0);
    struct json_object *j = json_tokener_parse(o.text);
    struct json_object *budgets = field(j, "budgets");
    KT_REQUIRE(budgets && json_object_array_length(budgets) == 2);
    static const bool want[] = {false, true};
    for (size_t b = 0; b < 2; b++) {
        struct json_object *reach = field(json_object_array_get_idx(budgets, b), "reachable");
        KT_REQUIRE(reach && json_object_array_length(reach) == 1);
        KT_CHECK_EQ(json_object_get_boolean(json_object_array_get_idx(reach, 0)), want[b]);
    }
    struct json_object *r = json_object_array_get_idx(field(j, "bounded_runs"), 0);
    KT_CHECK(!json_object_get_boolean(field(r, "reachable")));
    KT_CHECK(num(r, "base_bytes") > (INT64_C(1) << 20));
    json_object_put(j);
    /* The text says which budgets could not be held, and why. */
    KT_REQUIRE(run_kiln(&o, (const char *[]){"bench", "replay", "--threads", "1", "--memory-budget",
                                             "1M", tri, NULL}) == 0);
    KT_CHECK(strstr(o.text, "* unreachable") != NULL);
}

/* --isolate: each count also builds in worker processes (kiln __worker,
 * which passes the Fossilize builder); the peak counts kiln and its
 * workers, and the split by kind is unknown to the parent. */
KT_CASE(isolate_json)
{
    pf_need_vulkan();
    struct out o;
    const char *tri = KILN_SOURCE_DIR "/fuzz/corpus/foz/triangle.foz";
    KT_REQUIRE(run_kiln(&o, (const char *[]){"bench", "replay", "--threads", "1", "--isolate",
                                             "--json", tri, NULL}) == 0);
    struct json_object *j = json_tokener_parse(o.text);
    static const unsigned one[] = {1};
    check_report(j, one, 1);
    struct json_object *iso = field(j, "isolated_runs");
    KT_REQUIRE(iso && json_object_array_length(iso) == 1);
    struct json_object *r = json_object_array_get_idx(iso, 0);
    KT_CHECK_EQ(num(r, "built"), 1);
    KT_CHECK_EQ(num(r, "failed"), 0);
    KT_CHECK_EQ(num(r, "driver_compiles"), 1);
    KT_CHECK(json_object_is_type(field(r, "graphics"), json_type_null));
    KT_CHECK(num(r, "peak_rss_bytes") >= num(r, "own_peak_rss_bytes"));
    KT_CHECK(!json_object_object_get_ex(r, "within_budget", NULL));
    KT_CHECK_EQ(json_object_array_length(field(j, "isolated_vs_plain")), 1);
    KT_CHECK(json_object_object_get_ex(field(j, "seconds"), "pipelines_1t_isolated", NULL));
    /* What the workers did: one program, one worker, one message, nothing
     * sent again; the threads' run has no such object. Both peaks per
     * count, the isolated one kiln's and its workers'. */
    struct json_object *w = field(r, "isolated");
    KT_CHECK_EQ(num(w, "workers"), 1);
    KT_CHECK_EQ(num(w, "workers_started"), 1);
    KT_CHECK_EQ(num(w, "batches"), 1);
    KT_CHECK_EQ(num(w, "resent"), 0);
    KT_CHECK_EQ(num(w, "early_timeouts"), 0);
    KT_CHECK(json_object_object_get_ex(w, "time_limit_ms", NULL));
    struct json_object *plain = json_object_array_get_idx(field(j, "runs"), 0);
    KT_CHECK(json_object_is_type(field(plain, "isolated"), json_type_null));
    KT_CHECK_EQ(json_object_array_length(field(j, "counted_peak_bytes")), 1);
    KT_CHECK_EQ(json_object_array_length(field(j, "isolated_counted_peak_bytes")), 1);
    KT_CHECK(json_object_get_int64(
                 json_object_array_get_idx(field(j, "isolated_counted_peak_bytes"), 0)) > 0);
    json_object_put(j);
}

/* Corpus archives alone and together: a pipeline two archives hold is
 * replayed once, and every pipeline met is counted somewhere. gears holds a
 * vertex module SPIR-V's validator refuses but that is well-formed: recorded,
 * so stored and built like the rest (docs/reliability.md), none failed. */
KT_CASE(corpus_dedupe)
{
    kt_require_corpus("foz/sascha-willems");
    pf_need_vulkan();
    static const char *const names[] = {"triangle", "bloom", "gears", "computecloth"};
    char paths[4][4096];
    const char *args[16] = {"bench", "replay", "--threads", "2", "--json"};
    size_t na = 5;
    int64_t met = 0, alone = 0;
    static const unsigned two[] = {2};
    for (size_t a = 0; a < 4; a++) {
        snprintf(paths[a], sizeof(paths[a]), "%s/foz/sascha-willems/%s.f93c6e96adcd7946.1.foz",
                 kt_corpus_dir(), names[a]);
        args[na++] = paths[a];
        struct out o;
        KT_REQUIRE(run_kiln(&o, (const char *[]){"bench", "replay", "--threads", "2", "--json",
                                                 paths[a], NULL}) == 0);
        struct json_object *j = json_tokener_parse(o.text);
        check_report(j, two, 1);
        met += num(j, "pipelines_met");
        alone += num(j, "pipelines");
        json_object_put(j);
    }
    args[na] = NULL;
    struct out o;
    KT_REQUIRE(run_kiln(&o, args) == 0);
    struct json_object *j = json_tokener_parse(o.text);
    check_report(j, two, 1);
    KT_CHECK_EQ(num(j, "archives"), 4);
    KT_CHECK_EQ(num(j, "pipelines_met"), met);
    KT_CHECK(num(j, "duplicates") > 0);
    KT_CHECK(num(j, "pipelines") < alone);
    struct json_object *r = json_object_array_get_idx(field(j, "runs"), 0);
    KT_CHECK_EQ(num(field(r, "graphics"), "failed"), 0);
    KT_CHECK_EQ(num(r, "not_stored"), 0);
    KT_CHECK(num(field(r, "compute"), "built") >= 1);
    json_object_put(j);
}

/* --generate: the generator's programs prepared without Vulkan, exported
 * as an archive and replayed: every one built, none failed. With
 * --keep-archive the archive stays where asked, and replaying it as an
 * archive (kiln_foz_pipelines_open) finds the same pipelines. */
KT_CASE(generate_json)
{
    pf_need_vulkan();
    struct out o;
    KT_REQUIRE(run_kiln(&o, (const char *[]){"bench", "replay", "--generate", "6", "--seed", "7",
                                             "--threads", "1", "--json", NULL}) == 0);
    struct json_object *j = json_tokener_parse(o.text);
    static const unsigned one[] = {1};
    check_report(j, one, 1);
    KT_CHECK_EQ(num(j, "archives"), 1);
    KT_CHECK_EQ(num(j, "pipelines"), 6);
    KT_CHECK_EQ(num(j, "duplicates"), 0);
    KT_CHECK_EQ(num(j, "unreadable"), 0);
    KT_CHECK_EQ(num(field(j, "kinds"), "graphics") + num(field(j, "kinds"), "compute"), 6);
    KT_CHECK(json_object_is_type(field(j, "archive"), json_type_string));
    struct json_object *r = json_object_array_get_idx(field(j, "runs"), 0);
    KT_CHECK_EQ(num(r, "built"), 6);
    KT_CHECK_EQ(num(r, "failed"), 0);
    KT_CHECK_EQ(num(r, "skipped"), 0);
    json_object_put(j);

    char kept[4096];
    snprintf(kept, sizeof(kept), "%s/generated.foz", kt_tmpdir());
    KT_REQUIRE(run_kiln(&o, (const char *[]){"bench", "replay", "--generate", "6", "--seed", "7",
                                             "--keep-archive", kept, "--threads", "1", "--json",
                                             NULL}) == 0);
    j = json_tokener_parse(o.text);
    check_report(j, one, 1);
    KT_CHECK(strcmp(json_object_get_string(field(j, "archive")), kept) == 0);
    json_object_put(j);
    KT_REQUIRE(access(kept, R_OK) == 0);
    KT_REQUIRE(run_kiln(&o, (const char *[]){"bench", "replay", "--threads", "1", "--json", kept,
                                             NULL}) == 0);
    j = json_tokener_parse(o.text);
    check_report(j, one, 1);
    KT_CHECK_EQ(num(j, "pipelines"), 6);
    KT_CHECK(json_object_is_type(field(j, "archive"), json_type_null));
    r = json_object_array_get_idx(field(j, "runs"), 0);
    KT_CHECK_EQ(num(r, "built"), 6);
    KT_CHECK_EQ(num(r, "failed"), 0);
    json_object_put(j);
}

KT_MAIN(KT_ENTRY(usage), KT_ENTRY(triangle_json), KT_ENTRY(memory_budget_json),
        KT_ENTRY(memory_budget_unreachable), KT_ENTRY(isolate_json), KT_ENTRY(corpus_dedupe),
        KT_ENTRY(generate_json))

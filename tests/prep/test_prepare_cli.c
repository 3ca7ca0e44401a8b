/*
 * test_prepare_cli.c - `kiln prepare` and `kiln start` as a user runs them:
 * the built kiln binary, spawned, its exit code and its --json output.
 *
 * The binary's path comes from the build (KILN_CLI). Under
 * AddressSanitizer, runs that make a Vulkan context get detect_leaks=0:
 * the loader unloads the driver when the context goes, and LeakSanitizer
 * can then no longer name the driver library its own leaks come from, so
 * tests/support/lsan.supp cannot match them (kiln's own leak checks are
 * the library tests, which keep the driver loaded).
 */
#include "kiln_test.h"
#include "kt_spawn.h"
#include "prep_fixture.h"

#include <json-c/json.h>
#include <sys/stat.h>

struct out {
    char text[65536];
    size_t len;
};

/* Runs kiln with `args` (NULL-terminated); stdout into *o, stderr into the
 * file `err_path` (NULL: this process's stderr); leak detection off for
 * Vulkan runs (see top). @return the exit code, or -1. */
static int run_kiln_err(bool vulkan, struct out *o, const char *err_path, const char *const *args)
{
    struct kt_spawn r = {.stderr_path = err_path,
                         .leak_checks = !vulkan,
                         .out = o->text,
                         .out_cap = sizeof(o->text)};
    int ex = kt_spawn_exit(KILN_CLI, args, &r);
    o->len = r.out_len;
    return ex;
}

static int run_kiln(bool vulkan, struct out *o, const char *const *args)
{
    return run_kiln_err(vulkan, o, NULL, args);
}

/* Reads the file `path` into *o. @return its line count, or -1. */
static int read_lines(const char *path, struct out *o)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    o->len = fread(o->text, 1, sizeof(o->text) - 1, f);
    o->text[o->len] = '\0';
    fclose(f);
    int lines = 0;
    for (size_t i = 0; i < o->len; i++)
        lines += o->text[i] == '\n';
    return lines;
}

static int64_t json_int(struct json_object *j, const char *key)
{
    struct json_object *v;
    if (!json_object_object_get_ex(j, key, &v)) {
        kt_fail(__FILE__, __LINE__, "no field '%s' in the JSON", key);
        return -1;
    }
    return json_object_get_int64(v);
}

static bool json_has(struct json_object *j, const char *key)
{
    return json_object_object_get_ex(j, key, NULL);
}

/* ---- cases ------------------------------------------------------------------ */

KT_CASE(usage)
{
    struct out o;
    KT_CHECK_EQ(run_kiln(false, &o, (const char *[]){"prepare", "--help", NULL}), 0);
    KT_CHECK(strstr(o.text, "usage:") != NULL);
    KT_CHECK_EQ(run_kiln(false, &o, (const char *[]){"start", "--help", NULL}), 0);
    KT_CHECK(strstr(o.text, "usage:") != NULL);
    KT_CHECK_EQ(run_kiln(false, &o, (const char *[]){"prepare", "--bogus", NULL}), 2);
    KT_CHECK_EQ(run_kiln(false, &o, (const char *[]){"prepare", "--jobs", "zero", NULL}), 2);
    KT_CHECK_EQ(run_kiln(false, &o, (const char *[]){"prepare", "--generate", "0", NULL}), 2);
    KT_CHECK_EQ(
        run_kiln(false, &o, (const char *[]){"prepare", "--corpus", "x", "--generate", "3", NULL}),
        2);
    KT_CHECK_EQ(run_kiln(false, &o, (const char *[]){"prepare", "extra", NULL}), 2);
    KT_CHECK_EQ(run_kiln(false, &o, (const char *[]){"start", "--device", "-1", NULL}), 2);
    KT_CHECK_EQ(o.len, 0); /* errors go to stderr */

    /* A corpus folder that is not there, a folder without a cache. */
    const char *root = kt_tmpdir();
    char missing[4200], cache[4200];
    snprintf(missing, sizeof(missing), "%s/none", root);
    snprintf(cache, sizeof(cache), "%s/cache", root);
    KT_CHECK_EQ(run_kiln(false, &o,
                         (const char *[]){"prepare", "--corpus", missing, "--cache", cache,
                                          "--no-vulkan", NULL}),
                2);
    KT_CHECK_EQ(run_kiln(false, &o, (const char *[]){"start", "--cache", root, NULL}), 2);
}

/* prepare then start, --json, a good corpus: exit 0 and the fields. */
KT_CASE(prepare_start_json)
{
    pf_need_vulkan();
    const char *root = kt_tmpdir();
    char corpus[4200], cache[4200];
    snprintf(cache, sizeof(cache), "%s/cache", root);
    KT_REQUIRE(pf_corpus(corpus, sizeof(corpus), root, false) == 0);

    struct out o;
    KT_CHECK_EQ(run_kiln(true, &o,
                         (const char *[]){"prepare", "--corpus", corpus, "--cache", cache, "--jobs",
                                          "1", "--json", NULL}),
                0);
    struct json_object *j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK_EQ(json_int(j, "programs"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "translated"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "cached"), 0);
    KT_CHECK_EQ(json_int(j, "failed"), 0);
    KT_CHECK_EQ(json_int(j, "pipelines_built"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "pipelines_failed"), 0);
    KT_CHECK_EQ(json_int(j, "workers"), 1);
    KT_CHECK(json_has(j, "workers_reason") && json_has(j, "peak_rss_bytes"));
    KT_CHECK(json_has(j, "device") && json_has(j, "stamp"));
    struct json_object *secs;
    KT_CHECK(json_object_object_get_ex(j, "seconds", &secs) && json_has(secs, "translate") &&
             json_has(secs, "pipelines") && json_has(secs, "total"));
    json_object_put(j);

    KT_CHECK_EQ(
        run_kiln(true, &o,
                 (const char *[]){"start", "--cache", cache, "--jobs", "1", "--json", NULL}),
        0);
    j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK_EQ(json_int(j, "records"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "loaded"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "missing"), 0);
    KT_CHECK_EQ(json_int(j, "pipelines_built"), PF_GOOD_PROGRAMS);
    struct json_object *v;
    KT_CHECK(json_object_object_get_ex(j, "cache_open", &v) &&
             strcmp(json_object_get_string(v), "index") == 0);
    KT_CHECK(json_object_object_get_ex(j, "pipeline_cache", &v) &&
             strcmp(json_object_get_string(v), "loaded") == 0);
    KT_CHECK(json_object_object_get_ex(j, "seconds", &secs) && json_has(secs, "open") &&
             json_has(secs, "read") && json_has(secs, "pipelines") && json_has(secs, "total"));
    /* The driver's word on this (second) run over the cache: lavapipe gives
     * feedback for every pipeline and its pipeline cache held none. */
    bool lavapipe = json_object_object_get_ex(j, "device", &v) &&
                    strstr(json_object_get_string(v), "llvmpipe") != NULL;
    KT_CHECK(json_int(j, "feedback_pipelines") <= PF_GOOD_PROGRAMS);
    KT_CHECK(json_int(j, "driver_cache_hits") <= json_int(j, "feedback_pipelines"));
    if (lavapipe) {
        KT_CHECK_EQ(json_int(j, "feedback_pipelines"), PF_GOOD_PROGRAMS);
        KT_CHECK_EQ(json_int(j, "driver_cache_hits"), 0);
        KT_CHECK(json_int(j, "driver_ns") > 0);
    }
    json_object_put(j);

    /* The plain table names every phase, and the driver's word. */
    KT_CHECK_EQ(run_kiln(true, &o, (const char *[]){"start", "--cache", cache, NULL}), 0);
    KT_CHECK(strstr(o.text, "open") && strstr(o.text, "read") && strstr(o.text, "pipelines") &&
             strstr(o.text, "total") && strstr(o.text, "  driver     "));

    /* kiln cache stats shows the last prepare's and start's word. */
    KT_CHECK_EQ(run_kiln(true, &o, (const char *[]){"cache", "stats", cache, "--json", NULL}), 0);
    j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    struct json_object *word, *run;
    KT_REQUIRE(json_object_object_get_ex(j, "driver_word", &word));
    KT_CHECK(json_object_object_get_ex(word, "start", &run) &&
             json_int(run, "pipelines") == PF_GOOD_PROGRAMS);
    KT_CHECK(json_object_object_get_ex(word, "prepare", &run) &&
             json_int(run, "pipelines") == PF_GOOD_PROGRAMS);
    KT_CHECK(json_object_object_get_ex(word, "service", &run) && run == NULL);
    json_object_put(j);
    KT_CHECK_EQ(run_kiln(true, &o, (const char *[]){"cache", "stats", cache, NULL}), 0);
    KT_CHECK(strstr(o.text, "driver word prepare") != NULL);
}

/* The second prepare compiles nothing (the ledger answers), and says so in
 * --json and in the table; --retry-failed, --memory-budget and
 * --background are taken. */
KT_CASE(second_prepare_json)
{
    const char *root = kt_tmpdir();
    char corpus[4200], cache[4200];
    snprintf(cache, sizeof(cache), "%s/cache", root);
    KT_REQUIRE(pf_corpus(corpus, sizeof(corpus), root, false) == 0);
    struct out o;
    KT_CHECK_EQ(run_kiln(true, &o,
                         (const char *[]){"prepare", "--corpus", corpus, "--cache", cache,
                                          "--memory-budget", "4G", "--background", "--json", NULL}),
                0);
    struct json_object *j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK_EQ(json_int(j, "driver_compiles"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "ledger_skipped"), 0);
    KT_CHECK_EQ(json_int(j, "memory_budget_bytes"), 4ll << 30);
    KT_CHECK(json_has(j, "background") && json_has(j, "canceled"));
    struct json_object *v;
    KT_CHECK(json_object_object_get_ex(j, "workers_reason", &v) &&
             strstr(json_object_get_string(v), "background") != NULL);
    json_object_put(j);

    KT_CHECK_EQ(run_kiln(true, &o,
                         (const char *[]){"prepare", "--corpus", corpus, "--cache", cache,
                                          "--retry-failed", "--json", NULL}),
                0);
    j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK_EQ(json_int(j, "driver_compiles"), 0);
    KT_CHECK_EQ(json_int(j, "ledger_skipped"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "pipelines_built"), 0);
    json_object_put(j);
    KT_CHECK_EQ(
        run_kiln(true, &o, (const char *[]){"prepare", "--corpus", corpus, "--cache", cache, NULL}),
        0);
    KT_CHECK(strstr(o.text, "0 driver compiles, 3 answered by the build ledger") != NULL);
    KT_CHECK_EQ(run_kiln(true, &o,
                         (const char *[]){"prepare", "--corpus", corpus, "--cache", cache,
                                          "--memory-budget", "12Q", NULL}),
                2);
}

/* --binaries on where the device lacks VK_KHR_pipeline_binary (or kiln's
 * headers do): one warning line, pipelines.vkc serves, the counts say
 * where the start's pipelines came from; a bad mode is a usage error. */
KT_CASE(binaries_fallback_json)
{
    pf_need_vulkan();
    const char *root = kt_tmpdir();
    char corpus[4200], cache[4200], err[4200];
    snprintf(cache, sizeof(cache), "%s/cache", root);
    snprintf(err, sizeof(err), "%s/err", root);
    KT_REQUIRE(pf_corpus(corpus, sizeof(corpus), root, false) == 0);
    struct out o, e;
    KT_CHECK_EQ(run_kiln_err(true, &o, err,
                             (const char *[]){"prepare", "--corpus", corpus, "--cache", cache,
                                              "--binaries", "on", "--json", NULL}),
                0);
    struct json_object *j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    struct json_object *v;
    bool used = json_object_object_get_ex(j, "binaries_used", &v) && json_object_get_boolean(v);
    json_object_put(j);
    if (used) {
        printf("skipped: the device offers VK_KHR_pipeline_binary\n");
        exit(77);
    }
    KT_CHECK_EQ(read_lines(err, &e), 1);
    KT_CHECK(strstr(e.text, "driver binaries") != NULL);

    KT_CHECK_EQ(run_kiln(true, &o,
                         (const char *[]){"start", "--cache", cache, "--binaries", "auto",
                                          "--binaries-rebuild", "--json", NULL}),
                0);
    j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK_EQ(json_int(j, "pipelines_built"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "from_binaries"), 0);
    KT_CHECK_EQ(json_int(j, "from_pipeline_cache") + json_int(j, "compiled"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "binaries_stale"), 0);
    KT_CHECK(json_has(j, "binaries_kept") && json_has(j, "binaries_damaged"));
    json_object_put(j);
    KT_CHECK_EQ(
        run_kiln(false, &o, (const char *[]){"start", "--cache", cache, "--binaries", "yes", NULL}),
        2);

    /* The bench's two starts in isolated workers build every pipeline. */
    KT_CHECK_EQ(run_kiln(true, &o,
                         (const char *[]){"bench", "start", "--binaries", "--isolate", "--cache",
                                          cache, "--json", NULL}),
                0);
    j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    struct json_object *pc;
    KT_CHECK(json_object_object_get_ex(j, "isolate", &v) && json_object_get_boolean(v));
    KT_REQUIRE(json_object_object_get_ex(j, "pipeline_cache", &pc));
    KT_CHECK_EQ(json_int(pc, "pipelines_built"), PF_GOOD_PROGRAMS);
    json_object_put(j);
    KT_CHECK_EQ(run_kiln(false, &o,
                         (const char *[]){"bench", "start", "--isolate", "--cache", cache, NULL}),
                2);
}

/* One broken program: the rest is made, and the exit code says 1. */
KT_CASE(failure_exit_code)
{
    const char *root = kt_tmpdir();
    char corpus[4200], cache[4200];
    snprintf(cache, sizeof(cache), "%s/cache", root);
    KT_REQUIRE(pf_corpus(corpus, sizeof(corpus), root, true) == 0);

    struct out o;
    KT_CHECK_EQ(run_kiln(false, &o,
                         (const char *[]){"prepare", "--corpus", corpus, "--cache", cache, "--jobs",
                                          "1", "--no-vulkan", "--json", NULL}),
                1);
    struct json_object *j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    struct json_object *v;
    KT_CHECK(json_object_object_get_ex(j, "ok", &v) && !json_object_get_boolean(v));
    KT_CHECK_EQ(json_int(j, "failed"), 1);
    KT_CHECK_EQ(json_int(j, "translated"), PF_GOOD_PROGRAMS);
    KT_CHECK_EQ(json_int(j, "pipelines_built"), 0);
    json_object_put(j);

    /* The three good ones load. */
    KT_CHECK_EQ(
        run_kiln(false, &o,
                 (const char *[]){"start", "--cache", cache, "--no-vulkan", "--json", NULL}),
        0);
    j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK_EQ(json_int(j, "loaded"), PF_GOOD_PROGRAMS);
    json_object_put(j);
}

/* A corpus that cannot be used: exit 2 and exactly one stderr line, naming
 * what and where. */
KT_CASE(bad_corpus_one_line)
{
    const char *root = kt_tmpdir();
    char missing[4200], foz[4200], empty[4200], cache[4200], err[4200];
    snprintf(missing, sizeof(missing), "%s/none", root);
    snprintf(foz, sizeof(foz), "%s/none.foz", root);
    snprintf(empty, sizeof(empty), "%s/empty", root);
    snprintf(cache, sizeof(cache), "%s/cache", root);
    snprintf(err, sizeof(err), "%s/stderr.txt", root);
    KT_REQUIRE(pf_mkdir(empty) == 0);
    const char *const bad[] = {missing, foz, empty};
    for (size_t i = 0; i < 3; i++) {
        struct out o, e;
        KT_CHECK_EQ(run_kiln_err(false, &o, err,
                                 (const char *[]){"prepare", "--corpus", bad[i], "--cache", cache,
                                                  "--no-vulkan", NULL}),
                    2);
        KT_CHECK_EQ(read_lines(err, &e), 1);
        KT_CHECK(strstr(e.text, bad[i]) != NULL);
    }
    /* No cache in the folder: one line too. */
    struct out o, e;
    KT_CHECK_EQ(run_kiln_err(false, &o, err, (const char *[]){"start", "--cache", root, NULL}), 2);
    KT_CHECK_EQ(read_lines(err, &e), 1);
    KT_CHECK(strstr(e.text, root) != NULL);
}

/* prepare --dict, then start: the dictionary's fields, and last use. */
KT_CASE(dict_json)
{
    const char *root = kt_tmpdir();
    char cache[4200];
    snprintf(cache, sizeof(cache), "%s/cache", root);
    struct out o;
    KT_CHECK_EQ(run_kiln(false, &o,
                         (const char *[]){"prepare", "--generate", "6", "--cache", cache, "--jobs",
                                          "1", "--no-vulkan", "--dict", "--json", NULL}),
                0);
    struct json_object *j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    struct json_object *v;
    KT_CHECK(json_object_object_get_ex(j, "dict_trained", &v) && json_object_get_boolean(v));
    KT_CHECK(json_int(j, "dict_bytes") > 0);
    int64_t before = json_int(j, "dict_payload_bytes_before");
    int64_t after = json_int(j, "dict_payload_bytes_after");
    KT_CHECK(after > 0 && after < before);
    char dict_id[32] = "";
    KT_CHECK(json_object_object_get_ex(j, "dict_id", &v) && json_object_get_string(v));
    if (json_object_object_get_ex(j, "dict_id", &v) && json_object_get_string(v))
        snprintf(dict_id, sizeof(dict_id), "%s", json_object_get_string(v));
    json_object_put(j);

    KT_CHECK_EQ(
        run_kiln(false, &o,
                 (const char *[]){"start", "--cache", cache, "--no-vulkan", "--json", NULL}),
        0);
    j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK_EQ(json_int(j, "loaded"), 6);
    KT_CHECK(json_object_object_get_ex(j, "dict_id", &v) &&
             strcmp(json_object_get_string(v), dict_id) == 0);
    KT_CHECK(json_object_object_get_ex(j, "use_recorded", &v) && json_object_get_boolean(v));
    json_object_put(j);

    KT_CHECK_EQ(run_kiln(false, &o,
                         (const char *[]){"start", "--cache", cache, "--no-vulkan", "--read-only",
                                          "--json", NULL}),
                0);
    j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK(json_object_object_get_ex(j, "use_recorded", &v) && !json_object_get_boolean(v));
    json_object_put(j);
}

/* A kiln cache in `dir` (made) with records {k,k}, k in keys, under `stamp`. */
static void put_keys(const char *dir, uint64_t stamp, const uint64_t *keys, size_t n)
{
    struct kiln_cache_options co = {.size = sizeof(co), .stamp = stamp, .flags = KILN_CACHE_CREATE};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(dir, &co, &c));
    for (size_t i = 0; i < n; i++)
        KT_CHECK_OK(kiln_cache_put(c, (struct kiln_key){keys[i], keys[i]}, "bytes", 5, 5, 0, 0));
    KT_CHECK_OK(kiln_cache_sync(c));
    kiln_cache_close(c);
}

/* kiln cache prune and compact drop the host tier's records of programs
 * the cache no longer holds (binaries_swept), and nothing else. The tier
 * folders are written through the cache API with the tier's stamp. */
KT_CASE(prune_sweeps_binaries_json)
{
    const char *root = kt_tmpdir();
    char cache[4200], own[4300], other[4300], kpc[4300], size[32];
    snprintf(cache, sizeof(cache), "%s/cache", root);
    snprintf(own, sizeof(own), "%s/binaries/10005-1234-aa", cache);
    snprintf(other, sizeof(other), "%s/binaries/10de-2335-bb", cache);
    const uint64_t keys[] = {1, 2, 3};
    put_keys(cache, 7, keys, 3);
    put_keys(own, 0x4b4c4e42u, keys, 3);
    put_keys(other, 0x4b4c4e42u, keys, 2);

    /* Negative control: every program there, nothing swept. */
    struct out o;
    KT_CHECK_EQ(run_kiln(false, &o, (const char *[]){"cache", "compact", cache, "--json", NULL}),
                0);
    struct json_object *j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK_EQ(json_int(j, "binaries_swept"), 0);
    json_object_put(j);

    /* A prune to one byte under the file drops program 1 (all used today:
     * the earliest), and its binaries in both folders. */
    snprintf(kpc, sizeof(kpc), "%s/programs.kpc", cache);
    struct stat st;
    KT_REQUIRE(stat(kpc, &st) == 0);
    snprintf(size, sizeof(size), "%lld", (long long)st.st_size - 1);
    KT_CHECK_EQ(
        run_kiln(false, &o,
                 (const char *[]){"cache", "prune", cache, "--max-size", size, "--json", NULL}),
        0);
    j = json_tokener_parse(o.text);
    KT_REQUIRE(j != NULL);
    KT_CHECK_EQ(json_int(j, "dropped"), 1);
    KT_CHECK_EQ(json_int(j, "binaries_swept"), 2);
    json_object_put(j);
    struct kiln_cache_options ro = {
        .size = sizeof(ro), .stamp = 0x4b4c4e42u, .flags = KILN_CACHE_READ_ONLY};
    struct kiln_cache *c = NULL;
    KT_REQUIRE_OK(kiln_cache_open(own, &ro, &c));
    KT_CHECK_EQ(kiln_cache_count(c), 2);
    KT_CHECK_EQ(kiln_cache_find_sized(c, (struct kiln_key){1, 1}, 0, NULL), KILN_ENOTFOUND);
    kiln_cache_close(c);
    KT_REQUIRE_OK(kiln_cache_open(other, &ro, &c));
    KT_CHECK_EQ(kiln_cache_count(c), 1);
    kiln_cache_close(c);
}

KT_MAIN(KT_ENTRY(usage), KT_ENTRY(prepare_start_json), KT_ENTRY(failure_exit_code),
        KT_ENTRY(bad_corpus_one_line), KT_ENTRY(dict_json), KT_ENTRY(second_prepare_json),
        KT_ENTRY(binaries_fallback_json), KT_ENTRY(prune_sweeps_binaries_json))

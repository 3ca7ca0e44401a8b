/*
 * test_cli_peer.c - `kiln bench peer` against a stand-in for Fossilize's
 * replayer: a shell script the case writes, which records its arguments
 * and environment and prints fossilize-replay's summary lines, so the
 * bench's commands, its reading of the summary (one block per process
 * with --master-process, the "Playing back ..." lines beside them never
 * counted) and its --json fields are checked without the real peer. Never
 * a time: only that times and peaks were measured.
 *
 * kiln's side is the real `kiln prepare` on one small archive, so a case
 * without a Vulkan device prints one "skipped:" line and exits 77. The
 * real peer runs only where KILN_FOSSILIZE_REPLAY names it (case
 * real_peer; skipped otherwise, as in CI).
 */
#include "kiln_test.h"
#include "kt_cli.h"

#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARCHIVE KILN_SOURCE_DIR "/fuzz/corpus/foz/triangle.foz"

/* Ends the case as skipped where kiln finds no Vulkan device. */
static void require_vulkan(void)
{
    char out[4200], args[8600];
    snprintf(out, sizeof(out), "%s/probe.json", kt_case_dir());
    snprintf(args, sizeof(args), "prepare --corpus '%s' --cache '%s/probe-cache' --json", ARCHIVE,
             kt_case_dir());
    kt_cli_run(out, args);
    struct json_object *o = kt_cli_json(out);
    kt_cli_require_vulkan(o, out);
    json_object_put(o);
}

/*
 * Writes the stand-in at DIR/standin.sh: it appends its arguments and the
 * cache variables to DIR/standin.log, prints `graphics` graphics pipelines
 * in one summary block (two blocks with --master-process: all in the first,
 * none in the second), none when `summary` is false, and exits `code`.
 */
static void write_standin(char *path, size_t cap, unsigned graphics, bool summary, int code)
{
    snprintf(path, cap, "%s/standin.sh", kt_case_dir());
    FILE *f = fopen(path, "w");
    KT_NEED(f);
    fprintf(f,
            "#!/bin/sh\n"
            "echo \"args: $*\" >> '%s/standin.log'\n"
            "echo \"env: $MESA_SHADER_CACHE_DISABLE $__GL_SHADER_DISK_CACHE\" >> "
            "'%s/standin.log'\n"
            "blocks=1\n"
            "for a in \"$@\"; do [ \"$a\" = --master-process ] && blocks=2; done\n"
            "block() {\n"
            "  echo \"Fossilize INFO: Playing back 9 graphics pipelines took 0.001 s "
            "(accumulated time)\" >&2\n"
            "  echo \"Fossilize INFO: Replayed 3 objects in 30 ms:\" >&2\n"
            "  echo \"Fossilize INFO:   compute pipelines:           0\" >&2\n"
            "  echo \"Fossilize INFO:   graphics pipelines:          $1\" >&2\n"
            "  echo \"Fossilize INFO:   raytracing pipelines:        0\" >&2\n"
            "}\n"
            "if [ %d = 1 ]; then\n"
            "  block %u\n"
            "  [ $blocks = 2 ] && block 0\n"
            "fi\n"
            "exit %d\n",
            kt_case_dir(), kt_case_dir(), summary ? 1 : 0, graphics, code);
    KT_NEED(fclose(f) == 0);
    KT_NEED(chmod(path, 0755) == 0);
}

/* Runs the bench with the stand-in at `peer` and `args`. @return its
 * report; *rc its exit code. */
static struct json_object *run_peer(const char *peer, const char *args, int *rc)
{
    char out[4200], line[9000];
    snprintf(out, sizeof(out), "%s/peer.json", kt_case_dir());
    snprintf(line, sizeof(line), "bench peer --json --peer '%s' %s '%s'", peer, args, ARCHIVE);
    *rc = kt_cli_run(out, line);
    return kt_cli_json(out);
}

static uint64_t num(struct json_object *o, const char *key)
{
    uint64_t v = kt_json_num(o, key);
    if (v == UINT64_MAX)
        kt_fail(__FILE__, __LINE__, "no number %s", key);
    return v;
}

static const char *str(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    KT_NEED(json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string));
    return json_object_get_string(v);
}

static bool boolean(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    KT_NEED(json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean));
    return json_object_get_boolean(v);
}

static double dbl(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    KT_NEED(json_object_object_get_ex(o, key, &v));
    return json_object_get_double(v);
}

/* runs[i] of a report. */
static struct json_object *run_at(struct json_object *o, size_t i)
{
    struct json_object *runs = NULL;
    KT_NEED(json_object_object_get_ex(o, "runs", &runs));
    KT_NEED(i < json_object_array_length(runs));
    return json_object_array_get_idx(runs, i);
}

static struct json_object *side(struct json_object *run, const char *key)
{
    struct json_object *v = NULL;
    KT_NEED(json_object_object_get_ex(run, key, &v) && json_object_is_type(v, json_type_object));
    return v;
}

/* One measured run: both sides measured, with their commands. */
static void check_run(struct json_object *r, unsigned threads, bool isolated)
{
    char want[64];
    KT_CHECK_EQ(num(r, "threads"), threads);
    KT_CHECK(strcmp(str(r, "mode"), isolated ? "isolated" : "threads") == 0);
    KT_CHECK(dbl(r, "speed_ratio") > 0);
    KT_CHECK(dbl(r, "memory_ratio") > 0);
    struct json_object *secs = side(r, "seconds");
    KT_CHECK(dbl(secs, "peer") > 0 && dbl(secs, "kiln") > 0);
    struct json_object *p = side(r, "peer"), *k = side(r, "kiln");
    KT_CHECK(num(p, "peak_rss_bytes") > 0 && num(k, "peak_rss_bytes") > 0);
    KT_CHECK(num(k, "peak_rss_bytes") >= num(k, "maxrss_bytes") || isolated);
    snprintf(want, sizeof(want), "--num-threads %u%s", threads,
             isolated ? " --master-process" : "");
    KT_CHECK(strstr(str(p, "command"), want) != NULL);
    KT_CHECK(strstr(str(p, "command"), "triangle.foz") != NULL);
    snprintf(want, sizeof(want), "--jobs %u%s --json", threads, isolated ? " --isolate" : "");
    KT_CHECK(strstr(str(k, "command"), want) != NULL);
    KT_CHECK(strstr(str(k, "command"), "prepare --corpus ") != NULL);
    /* A tree is sampled exactly when the run is of several processes. */
    struct json_object *tree = NULL;
    KT_CHECK(json_object_object_get_ex(k, "tree_peak_bytes", &tree));
    KT_CHECK((tree != NULL) == isolated);
    KT_CHECK(json_object_object_get_ex(p, "tree_peak_bytes", &tree));
    KT_CHECK((tree != NULL) == isolated);
    KT_CHECK_EQ(num(k, "exit_code"), 0);
    KT_CHECK_EQ(num(k, "built"), 1);
    KT_CHECK_EQ(num(k, "pipelines"), 1);
}

/* Two counts, threads: the commands, the environment, the counts. */
KT_CASE(standin)
{
    require_vulkan();
    char peer[4200], log[4200], text[4096];
    write_standin(peer, sizeof(peer), 1, true, 0);
    int rc;
    struct json_object *o = run_peer(peer, "--threads 1,2", &rc);
    KT_CHECK_EQ(rc, 0);
    KT_CHECK(boolean(o, "ok"));
    KT_CHECK(strcmp(str(o, "work"), "archives") == 0);
    KT_CHECK_EQ(num(o, "archives"), 1);
    for (size_t i = 0; i < 2; i++) {
        struct json_object *r = run_at(o, i);
        check_run(r, i == 0 ? 1 : 2, false);
        KT_CHECK_EQ(num(side(r, "peer"), "pipelines"), 1);
        KT_CHECK_EQ(num(side(r, "peer"), "summaries"), 1);
        KT_CHECK(boolean(r, "same_pipelines"));
    }
    num(o, "seconds.peer_1t");
    num(o, "seconds.kiln_2t");
    snprintf(log, sizeof(log), "%s/standin.log", kt_case_dir());
    kt_slurp(log, text, sizeof(text));
    KT_CHECK(strstr(text, "args: --num-threads 1 " ARCHIVE) != NULL);
    KT_CHECK(strstr(text, "args: --num-threads 2 " ARCHIVE) != NULL);
    KT_CHECK(strstr(text, "env: true 0") != NULL);
    json_object_put(o);
}

/* --isolate: the peer's two summary blocks summed, the trees sampled. */
KT_CASE(standin_isolated)
{
    require_vulkan();
    char peer[4200];
    write_standin(peer, sizeof(peer), 1, true, 0);
    int rc;
    struct json_object *o = run_peer(peer, "--threads 2 --isolate", &rc);
    KT_CHECK_EQ(rc, 0);
    KT_CHECK(boolean(o, "isolate"));
    check_run(run_at(o, 0), 2, false);
    struct json_object *r = run_at(o, 1);
    check_run(r, 2, true);
    KT_CHECK_EQ(num(side(r, "peer"), "summaries"), 2);
    KT_CHECK_EQ(num(side(r, "peer"), "pipelines"), 1);
    KT_CHECK(boolean(r, "same_pipelines"));
    num(o, "seconds.kiln_2t_isolated");
    json_object_put(o);
}

/* Negative controls: a peer that counts otherwise is flagged; one that
 * fails, or prints no summary, fails the bench with the report printed. */
KT_CASE(standin_controls)
{
    require_vulkan();
    char peer[4200];
    write_standin(peer, sizeof(peer), 2, true, 0);
    int rc;
    struct json_object *o = run_peer(peer, "--threads 1", &rc);
    KT_CHECK_EQ(rc, 0);
    struct json_object *r = run_at(o, 0);
    KT_CHECK_EQ(num(side(r, "peer"), "pipelines"), 2);
    KT_CHECK(!boolean(r, "same_pipelines"));
    json_object_put(o);

    write_standin(peer, sizeof(peer), 1, false, 3);
    o = run_peer(peer, "--threads 1", &rc);
    KT_CHECK_EQ(rc, 1);
    KT_CHECK(!boolean(o, "ok"));
    r = run_at(o, 0);
    KT_CHECK_EQ(num(side(r, "peer"), "exit_code"), 3);
    struct json_object *v = NULL;
    KT_CHECK(json_object_object_get_ex(side(r, "peer"), "pipelines", &v) && v == NULL);
    KT_CHECK(!boolean(r, "same_pipelines"));
    KT_CHECK_EQ(num(side(r, "kiln"), "pipelines"), 1);
    json_object_put(o);
}

/* The real fossilize-replay, where KILN_FOSSILIZE_REPLAY names it. */
KT_CASE(real_peer)
{
    const char *peer = getenv("KILN_FOSSILIZE_REPLAY");
    if (!peer || !*peer || access(peer, X_OK) != 0) {
        printf("skipped: KILN_FOSSILIZE_REPLAY does not name a fossilize-replay executable\n");
        exit(77);
    }
    require_vulkan();
    int rc;
    struct json_object *o = run_peer(peer, "--threads 1", &rc);
    KT_CHECK_EQ(rc, 0);
    struct json_object *r = run_at(o, 0);
    check_run(r, 1, false);
    KT_CHECK_EQ(num(side(r, "peer"), "pipelines"), 1);
    KT_CHECK(boolean(r, "same_pipelines"));
    json_object_put(o);
}

KT_MAIN(KT_ENTRY(standin), KT_ENTRY(standin_isolated), KT_ENTRY(standin_controls),
        KT_ENTRY(real_peer))

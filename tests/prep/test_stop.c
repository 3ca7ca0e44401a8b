/*
 * test_stop.c - `kiln prepare` always ends after SIGINT or SIGTERM, within
 * its stop deadline, whatever a library call is stuck in, and leaves a
 * whole cache; and shaderc made unusable by an allocation failure (under a
 * low address-space limit) ends the run with one line saying to run again,
 * never a translation waiting forever on glslang's lock.
 *
 * Each case runs the built kiln binary (KILN_CLI) with a bound (kt_spawn's
 * limit_s): a kiln that does not end is killed and the case fails there.
 * No case reads a clock: the bound is a failure, never a measurement. The
 * translations need shaderc; --no-vulkan, so no case needs a device.
 */
#include "kiln_test.h"
#include "kt_cli.h"
#include "kt_spawn.h"

#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROGRAMS "12"
/* One of the twelve programs' sources: its translation hangs. */
#define STUCK "gen-000003-graphics.vert"
/* Far past the deadline (10 s) even on a loaded machine: only a kiln
 * that never ends meets it. */
#define BOUND_S 60

struct watch {
    const char *err_path;
    int signals; /* how many SIGTERMs to send once the translation hangs */
    bool sent;
};

/* Once the fault says the translation hangs, sends the SIGTERMs (two at
 * once: one request and its echo). */
static void term_when_stuck(void *user, int pid)
{
    struct watch *w = user;
    if (w->sent)
        return;
    char text[65536];
    kt_slurp(w->err_path, text, sizeof(text));
    if (!strstr(text, "hanging in translation"))
        return;
    w->sent = true;
    for (int i = 0; i < w->signals; i++)
        kill(pid, SIGTERM);
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* `kiln cache check DIR`'s exit code (0: whole). */
static int cache_check(const char *dir)
{
    char out[4096];
    const char *args[] = {"cache", "check", dir, NULL};
    struct kt_spawn k = {
        .stdin_path = "/dev/null", .limit_s = BOUND_S, .out = out, .out_cap = sizeof(out)};
    int ex = kt_spawn_exit(KILN_CLI, args, &k);
    if (ex != 0)
        fprintf(stderr, "kiln cache check %s:\n%s\n", dir, out);
    return ex;
}

/* A translation that never returns and heeds no stop flag (the test fault
 * hang-translate:, as shaderc on glslang's lock), SIGTERM sent `signals`
 * times at once: kiln ends by itself, exit code 130 (a signal stopped it) with the deadline's
 * line, not killed by the repeat (one within the echo window is the same
 * request); the cache is whole, and a second run resumes from it. */
static void stuck_translation(int signals, const char *deadline_env)
{
#ifndef KILN_TEST_FAULTS
    (void)signals;
    (void)deadline_env;
    printf("skipped: this build has no test faults (-DKILN_TEST_FAULTS=ON)\n");
    exit(77);
#else
    char cache[4200], err_path[4200], kpc[4300];
    snprintf(cache, sizeof(cache), "%s/cache", kt_case_dir());
    snprintf(err_path, sizeof(err_path), "%s/stderr", kt_case_dir());
    snprintf(kpc, sizeof(kpc), "%s/programs.kpc", cache);
    static char out[65536], err[65536];
    struct watch w = {.err_path = err_path, .signals = signals};
    const char *args[] = {"prepare", "--generate", PROGRAMS,      "--cache", cache,
                          "--jobs",  "2",          "--no-vulkan", NULL};
    struct kt_spawn k = {.stdin_path = "/dev/null",
                         .stderr_path = err_path,
                         .fault = "hang-translate:" STUCK,
                         .env = deadline_env,
                         .limit_s = BOUND_S,
                         .out = out,
                         .out_cap = sizeof(out),
                         .during = term_when_stuck,
                         .during_user = &w};
    int rc = kt_spawn(KILN_CLI, args, &k);
    kt_slurp(err_path, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "kiln's stderr:\n%s\n", err);
    KT_REQUIRE(rc == 0);
    KT_REQUIRE(w.sent);
    KT_CHECK(WIFEXITED(k.status) && WEXITSTATUS(k.status) == 130);
    KT_CHECK(strstr(err, "kiln prepare: did not stop within") != NULL);
    KT_CHECK(is_file(kpc));
    KT_CHECK_EQ(cache_check(cache), 0);
    /* What was stored before the stop is kept (the programs handed out
     * before the one that hung, at least): the next run translates the
     * rest only. */
    const char *again[] = {"prepare", "--generate", PROGRAMS,      "--cache", cache,
                           "--jobs",  "2",          "--no-vulkan", "--json",  NULL};
    struct kt_spawn k2 = {.stdin_path = "/dev/null",
                          .stderr_path = err_path,
                          .limit_s = BOUND_S,
                          .out = out,
                          .out_cap = sizeof(out)};
    KT_CHECK_EQ(kt_spawn_exit(KILN_CLI, again, &k2), 0);
    int64_t cached = kt_json_text_int(out, "cached"),
            translated = kt_json_text_int(out, "translated");
    KT_CHECK(cached >= 1 && translated >= 1);
    KT_CHECK_EQ(cached + translated, 12);
    if (kt_failures) {
        fprintf(stderr, "kiln's stderr:\n%s\n", err);
    }
#endif
}

/* The default deadline (10 s): one SIGTERM. */
KT_CASE(sigterm_ends_stuck_translation)
{
    stuck_translation(1, NULL);
}

/* A shorter deadline, and the signal twice at once (a group's echo):
 * still one request, so still the deadline's end, not the signal's. */
KT_CASE(sigterm_echo_is_one_request)
{
    stuck_translation(2, "KILN_STOP_DEADLINE_MS=2000");
}

/* One run of kiln prepare under `limit_kib` of address space (ulimit -v in
 * a shell that then runs kiln). @return 0 with the status, or -1. */
static int run_limited(const char *cache, unsigned limit_kib, const char *jobs,
                       const char *err_path, int *status)
{
    char script[8192];
    snprintf(script, sizeof(script),
             "ulimit -v %u && exec '%s' prepare --generate 50 --cache '%s' --jobs %s --no-vulkan",
             limit_kib, KILN_CLI, cache, jobs);
    char out[65536];
    const char *args[] = {"-c", script, NULL};
    struct kt_spawn k = {.stdin_path = "/dev/null",
                         .stderr_path = err_path,
                         .env = "KILN_STOP_DEADLINE_MS=3000",
                         .limit_s = BOUND_S,
                         .out = out,
                         .out_cap = sizeof(out)};
    int rc = kt_spawn("/bin/sh", args, &k);
    *status = k.status;
    return rc;
}

/* Under a low address-space limit (RLIMIT_AS) shaderc's allocations fail
 * inside glslang, whose lock then stays held. Limits from one kiln cannot
 * start with to one where everything fits, with one worker and with two (a
 * second translation may already wait on the lock): every run ends by
 * itself (exit code 1 with a line that says to run again, or 0), and at
 * least one limit made shaderc fail. The cache of every run is whole.
 * nosan: a sanitizer's shadow memory does not fit any such limit. */
KT_CASE(low_address_space_limit)
{
    static const unsigned limits_mib[] = {30, 40, 50, 60, 70, 80, 90, 100, 120, 160};
    static const char *const jobs[] = {"1", "2"};
    char err_path[4200];
    snprintf(err_path, sizeof(err_path), "%s/stderr", kt_case_dir());
    static char err[65536];
    for (size_t j = 0; j < 2; j++) {
        unsigned poisoned = 0;
        for (size_t i = 0; i < sizeof(limits_mib) / sizeof(limits_mib[0]) && !poisoned; i++) {
            char cache[4200], kpc[4300], rm[8500];
            snprintf(cache, sizeof(cache), "%s/cache-%s-%u", kt_case_dir(), jobs[j], limits_mib[i]);
            snprintf(kpc, sizeof(kpc), "%s/programs.kpc", cache);
            int status = 0;
            int rc = run_limited(cache, limits_mib[i] * 1024u, jobs[j], err_path, &status);
            kt_slurp(err_path, err, sizeof(err));
            if (rc < 0) {
                fprintf(stderr, "%u MiB, --jobs %s: did not end; stderr:\n%s\n", limits_mib[i],
                        jobs[j], err);
                KT_REQUIRE(rc == 0);
            }
            KT_CHECK(WIFEXITED(status));
            int ex = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            KT_CHECK(ex == 0 || ex == 1);
            if (strstr(err, "shaderc failed inside")) {
                poisoned++;
                KT_CHECK_EQ(ex, 1);
                KT_CHECK(strstr(err, "shaderc ran out of memory and cannot be used again") ||
                         strstr(err, "kiln prepare: did not stop within"));
            }
            if (is_file(kpc))
                KT_CHECK_EQ(cache_check(cache), 0);
            printf("%u MiB, --jobs %s: exit %d%s\n", limits_mib[i], jobs[j], ex,
                   poisoned ? ", shaderc failed" : "");
            snprintf(rm, sizeof(rm), "rm -rf '%s'", cache);
            if (system(rm) != 0)
                kt_fail(__FILE__, __LINE__, "cannot remove %s", cache);
            if (kt_failures)
                fprintf(stderr, "kiln's stderr:\n%s\n", err);
        }
        KT_CHECK(poisoned > 0);
    }
}

KT_MAIN(KT_ENTRY(sigterm_ends_stuck_translation), KT_ENTRY(sigterm_echo_is_one_request),
        KT_ENTRY(low_address_space_limit))

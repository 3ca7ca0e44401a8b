/*
 * test_isolate.c - isolation (kiln prepare --isolate): pipelines built in
 * worker processes, with the test-only fault ($KILN_TEST_FAULT, builds
 * with KILN_TEST_FAULTS) making one program's build crash, abort or hang.
 *
 * Each case runs the built kiln binary (KILN_CLI) on a dozen generated
 * programs (kt_spawn: stdout read back, stderr into a file) and waits for
 * it with a bound (RUN_LIMIT_S, then SIGKILL and a failure), so no case
 * can hang. A case that needs the fault skips (exit 77) in a build
 * without it; every case skips where there is no Vulkan. Under
 * AddressSanitizer the runs get detect_leaks=0, as in test_prepare_cli.c
 * (the driver is unloaded before LeakSanitizer could name it).
 */
#include "kiln_test.h"
#include "kt_cli.h"
#include "kt_spawn.h"
#include "prep_fixture.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

#define PROGRAMS    "12"
#define NPROGRAMS   12
#define VICTIM      "gen-000005-graphics" /* one of the twelve */
#define RUN_LIMIT_S 240

struct run {
    int status; /* waitpid's */
    char out[65536];
    char err[65536];
};

/*
 * Runs kiln with `args`, `fault` as $KILN_TEST_FAULT (NULL: none) and
 * `in_path` as stdin (NULL: /dev/null), and `env` (run_kiln_env; NULL:
 * none) as one more NAME=value. @return 0 with the wait status and
 * the output in *r, or -1 (logged as a failure, the child killed).
 */
static int run_kiln_env(const char *fault, const char *env, const char *in_path,
                        const char *const *args, struct run *r)
{
    char err_path[4200];
    snprintf(err_path, sizeof(err_path), "%s/stderr", kt_case_dir());
    /* Bounded: a kiln that hangs is killed and the case fails. */
    struct kt_spawn k = {.stdin_path = in_path ? in_path : "/dev/null",
                         .stderr_path = err_path,
                         .fault = fault,
                         .env = env,
                         .limit_s = RUN_LIMIT_S,
                         .out = r->out,
                         .out_cap = sizeof(r->out)};
    if (kt_spawn(KILN_CLI, args, &k) < 0)
        return -1;
    r->status = k.status;
    kt_slurp(err_path, r->err, sizeof(r->err));
    unlink(err_path);
    return 0;
}

static int run_kiln(const char *fault, const char *in_path, const char *const *args, struct run *r)
{
    return run_kiln_env(fault, NULL, in_path, args, r);
}

static int exit_code(const struct run *r)
{
    return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
}

static void need_faults(void)
{
#ifndef KILN_TEST_FAULTS
    printf("skipped: this build has no test faults (-DKILN_TEST_FAULTS=ON)\n");
    exit(77);
#endif
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* What an isolation case starts from: its cache folder, the
 * pipelines.vkc in it, and a zeroed run. */
struct isolate_case {
    char cache[4200], vkc[4300];
    struct run *r;
};

/* Skips the case (exit 77) without Vulkan, and without the test faults
 * when `faults`; then fills *c. @return false on no memory (a failure
 * recorded). */
static bool case_begin(struct isolate_case *c, bool faults)
{
    if (faults)
        need_faults();
    pf_need_vulkan();
    snprintf(c->cache, sizeof(c->cache), "%s/cache", kt_case_dir());
    snprintf(c->vkc, sizeof(c->vkc), "%s/pipelines.vkc", c->cache);
    c->r = calloc(1, sizeof(*c->r));
    if (!c->r)
        kt_fail(__FILE__, __LINE__, "no memory for the run");
    return c->r != NULL;
}

/* Prints kiln's last stderr when the case failed, and frees the run. */
static void case_end(struct isolate_case *c)
{
    if (kt_failures)
        fprintf(stderr, "kiln's stderr:\n%s\n", c->r->err);
    free(c->r);
}

/* An isolated prepare of the twelve programs into `cache` on `jobs`
 * workers, with `fault`, `env` (run_kiln_env) and --timeout-ms (NULL:
 * none). */
static int prepare_jobs(const char *cache, const char *jobs, const char *fault, const char *env,
                        const char *timeout_ms, struct run *r)
{
    const char *args[16] = {"prepare", "--generate", PROGRAMS,    "--cache", cache,
                            "--jobs",  jobs,         "--isolate", "--json"};
    size_t n = 9;
    if (timeout_ms) {
        args[n++] = "--timeout-ms";
        args[n++] = timeout_ms;
    }
    args[n] = NULL;
    return run_kiln_env(fault, env, NULL, args, r);
}

/* The same on two workers. */
static int prepare_isolated(const char *cache, const char *fault, const char *timeout_ms,
                            struct run *r)
{
    return prepare_jobs(cache, "2", fault, NULL, timeout_ms, r);
}

/* ---- cases ------------------------------------------------------------------ */

/* No fault: every pipeline built in the workers and pipelines.vkc saved;
 * a second run compiles nothing. */
KT_CASE(isolated_builds_all)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, false));
    struct run *r = c.r;
    KT_REQUIRE(prepare_isolated(c.cache, NULL, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 0);
    /* The driver's word on each build came back from its worker. */
    KT_CHECK_EQ(kt_json_text_int(r->out, "feedback_pipelines"), NPROGRAMS);
    KT_CHECK(file_size(c.vkc) > 0);
    /* Every worker lived to send its pipeline cache: none was killed as
     * the pool's threads ended (the spawner thread, isolate.c). */
    KT_CHECK(strstr(r->err, "was not received") == NULL);
    /* A second run: every program from the cache, every pipeline answered
     * by the build ledger (the workers' results were recorded), no worker
     * started. */
    KT_REQUIRE(prepare_isolated(c.cache, NULL, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "cached"), NPROGRAMS);
    KT_CHECK_EQ(kt_json_text_int(r->out, "driver_compiles"), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_skipped"), NPROGRAMS);
    /* An isolated start: where its pipelines came from is the workers'
     * drivers' word, as in one process: "compiled" are those the driver
     * said it compiled, not every one a worker built. */
    KT_REQUIRE(run_kiln(NULL, NULL,
                        (const char *[]){"start", "--cache", c.cache, "--jobs", "2", "--isolate",
                                         "--json", NULL},
                        r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS);
    KT_CHECK_EQ(kt_json_text_int(r->out, "feedback_pipelines"), NPROGRAMS);
    KT_CHECK_EQ(kt_json_text_int(r->out, "compiled"),
                NPROGRAMS - kt_json_text_int(r->out, "driver_cache_hits"));
    case_end(&c);
}

/* A worker that crashes (or aborts) at one program: that pipeline fails
 * with one line naming it and the signal, every other is built, the run
 * ends with "some failed" (1) and pipelines.vkc is saved. */
static void crash_case(const char *fault, const char *signame)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    KT_REQUIRE(prepare_isolated(c.cache, fault, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS - 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "failed"), 0);
    KT_CHECK(strstr(r->err, "(" VICTIM "): not built: the worker process died") != NULL);
    KT_CHECK(strstr(r->err, signame) != NULL);
    KT_CHECK(file_size(c.vkc) > 0);
    case_end(&c);
}

KT_CASE(worker_crash)
{
    crash_case("crash:" VICTIM, "SIGSEGV");
}

/* The build ledger records the crasher as failed on this driver: the next
 * isolated run skips it (no driver compile at all, exit 0, one warning),
 * and --retry-failed builds it again (the fault gone: built). */
KT_CASE(crasher_skipped_then_retried)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    KT_REQUIRE(prepare_isolated(c.cache, "crash:" VICTIM, NULL, r) == 0);
    KT_REQUIRE(exit_code(r) == 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 1);
    KT_REQUIRE(prepare_isolated(c.cache, NULL, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "driver_compiles"), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_failed"), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 0);
    KT_CHECK(strstr(r->err, "1 program failed to build on this driver before: skipped") != NULL);
    const char *retry[] = {"prepare", "--generate", PROGRAMS, "--cache",        c.cache, "--jobs",
                           "2",       "--isolate",  "--json", "--retry-failed", NULL};
    KT_REQUIRE(run_kiln(NULL, NULL, retry, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "driver_compiles"), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_failed"), 0);
    case_end(&c);
}

KT_CASE(worker_abort)
{
    crash_case("abort:" VICTIM, "SIGABRT");
}

/* A worker that hangs at one program: killed at the time limit, that
 * pipeline fails, the others are built. */
KT_CASE(worker_hang)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    /* A limit far above any real build here, even under a sanitizer on a
     * loaded machine: only the hung one may pass it. */
    KT_REQUIRE(prepare_isolated(c.cache, "hang:" VICTIM, "20000", r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS - 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 1);
    KT_CHECK(strstr(r->err, "(" VICTIM "): not built: the worker passed its time limit") != NULL);
    KT_CHECK(file_size(c.vkc) > 0);
    case_end(&c);
}

/* What a run with a hung worker watches: kiln's stderr, the hung worker,
 * and what it sends once the worker hangs. */
struct hang_watch {
    char err_path[4200];
    long worker; /* 0 until the fault said which process hangs */
    bool group;  /* SIGINT to kiln's process group; else SIGKILL to kiln */
};

/* @return the worker the fault says hangs ("hanging in process N" in
 * kiln's stderr, the file `err_path`), or 0 while it has not said. */
static long hung_worker(const char *err_path)
{
    char text[65536];
    kt_slurp(err_path, text, sizeof(text));
    const char *at = strstr(text, "hanging in process ");
    return at ? strtol(at + strlen("hanging in process "), NULL, 10) : 0;
}

/* Once the fault says which worker hangs, kills kiln (not the worker), or
 * for w->group sends SIGINT to kiln's process group, as a terminal's
 * Ctrl-C does. */
static void signal_when_hung(void *user, int pid)
{
    struct hang_watch *w = user;
    if (w->worker)
        return;
    w->worker = hung_worker(w->err_path);
    if (!w->worker)
        return;
    if (w->group)
        kill(-pid, SIGINT);
    else
        kill(pid, SIGKILL);
}

/*
 * Runs `kiln prepare --isolate` of case `c` on one worker with the fault
 * hanging VICTIM's build, watched by `w` (signal_when_hung); when `group`,
 * kiln leads its own process group, with a 3 s stop deadline. @return
 * kt_spawn's, with the wait status in *status and stderr in c->r->err.
 */
static int run_hung(struct isolate_case *c, struct hang_watch *w, bool group, int *status)
{
    *w = (struct hang_watch){.group = group};
    snprintf(w->err_path, sizeof(w->err_path), "%s/stderr", kt_case_dir());
    const char *args[] = {"prepare", "--generate", PROGRAMS,    "--cache", c->cache,
                          "--jobs",  "1",          "--isolate", NULL};
    struct kt_spawn k = {.stdin_path = "/dev/null",
                         .stderr_path = w->err_path,
                         .fault = "hang:" VICTIM,
                         .env = group ? "KILN_STOP_DEADLINE_MS=3000" : NULL,
                         .own_group = group,
                         .limit_s = RUN_LIMIT_S,
                         .out = c->r->out,
                         .out_cap = sizeof(c->r->out),
                         .during = signal_when_hung,
                         .during_user = w};
    int rc = kt_spawn(KILN_CLI, args, &k);
    *status = k.status;
    kt_slurp(w->err_path, c->r->err, sizeof(c->r->err));
    return rc;
}

/* A worker hung in the driver dies with its parent: kiln is killed with
 * SIGKILL while the worker hangs (the fault prints its pid), and the
 * worker, handed to this process (a child subreaper) when kiln died, must
 * be gone, killed, within 2 s. Linux only (PR_SET_PDEATHSIG; Windows ties
 * workers to a job object instead). */
KT_CASE(orphan_worker_dies)
{
#ifndef __linux__
    printf("skipped: Linux only\n");
    exit(77);
#else
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    KT_REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    struct hang_watch w;
    int st;
    KT_REQUIRE(run_hung(&c, &w, false, &st) == 0);
    KT_REQUIRE(w.worker > 0);
    KT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* The worker is this process's child now: reaped here once it died. */
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 200 && got == 0; i++) {
        got = waitpid((pid_t)w.worker, &status, WNOHANG);
        if (got == 0) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    KT_CHECK_EQ(got, (pid_t)w.worker);
    if (got == (pid_t)w.worker)
        KT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    else if (got == 0) {
        kt_fail(__FILE__, __LINE__, "worker %ld outlived its parent by 2 s: killed", w.worker);
        kill((pid_t)w.worker, SIGKILL);
        waitpid((pid_t)w.worker, &status, 0);
    }
    while (waitpid(-1, &status, WNOHANG) > 0) /* any other worker, on its way out */
        ;
    case_end(&c);
#endif
}

/* A Ctrl-C at the terminal stops the run, and is not the driver's word: a
 * SIGINT to kiln's whole process group while a worker is in a build (it
 * hangs there, by the fault) must not kill that worker as the build's
 * crash, so the build ledger records nothing against the driver and the
 * next run builds all twelve. Fails when workers share kiln's group: the
 * worker dies of SIGINT and the next run skips the victim as crashed. */
KT_CASE(group_interrupt_spares_workers)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct hang_watch w;
    int st;
    KT_REQUIRE(run_hung(&c, &w, true, &st) == 0);
    KT_REQUIRE(w.worker > 0);
    KT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    KT_CHECK(strstr(c.r->err, "(" VICTIM "): not built: the worker process died") == NULL);
    /* The next run, the fault gone: nothing recorded against the driver. */
    KT_REQUIRE(prepare_isolated(c.cache, NULL, NULL, c.r) == 0);
    KT_CHECK_EQ(kt_json_text_int(c.r->out, "ledger_failed"), 0);
    KT_CHECK_EQ(kt_json_text_int(c.r->out, "pipelines_built") +
                    kt_json_text_int(c.r->out, "ledger_skipped"),
                NPROGRAMS);
    KT_CHECK_EQ(exit_code(c.r), 0);
    case_end(&c);
}

/* The warm start, isolated: records have no names there, so the fault
 * names the victim as the start logs it, by its key. */
KT_CASE(warm_start_worker_crash)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    char fault[128];
    struct kiln_program *p = NULL;
    KT_REQUIRE_OK(kiln_generate_program(KILN_GENERATOR_DEFAULT_SEED, 5, &p));
    KT_REQUIRE(strcmp(p->name, VICTIM) == 0);
    struct kiln_key k;
    KT_REQUIRE_OK(kiln_prep_program_key(p, &k));
    kiln_program_destroy(p);
    snprintf(fault, sizeof(fault), "crash:program %016" PRIx64 "%016" PRIx64, k.hi, k.lo);
    struct run *r = c.r;
    KT_REQUIRE(run_kiln(NULL, NULL,
                        (const char *[]){"prepare", "--generate", PROGRAMS, "--cache", c.cache,
                                         "--jobs", "2", "--no-vulkan", NULL},
                        r) == 0);
    KT_REQUIRE(exit_code(r) == 0);
    KT_REQUIRE(run_kiln(fault, NULL,
                        (const char *[]){"start", "--cache", c.cache, "--jobs", "2", "--isolate",
                                         "--json", NULL},
                        r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "loaded"), NPROGRAMS);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS - 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 1);
    KT_CHECK(strstr(r->err, fault + 6) != NULL && strstr(r->err, "SIGSEGV") != NULL);
    case_end(&c);
}

/* The negative control: without isolation the same fault takes the whole
 * process down, and no pipelines.vkc is saved. */
KT_CASE(crash_without_isolation)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    KT_REQUIRE(run_kiln("crash:" VICTIM, NULL,
                        (const char *[]){"prepare", "--generate", PROGRAMS, "--cache", c.cache,
                                         "--jobs", "2", "--json", NULL},
                        r) == 0);
    KT_CHECK(WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGSEGV);
    KT_CHECK_EQ(file_size(c.vkc), -1);
    case_end(&c);
}

/* The private worker command on bad input: one error line and exit 1, no
 * hang, for garbage and for a greeting cut short; silent exit 1 when the
 * parent is gone before greeting. */
KT_CASE(worker_bad_input)
{
    const char *root = kt_case_dir();
    char garbage[4200], cut[4200];
    snprintf(garbage, sizeof(garbage), "%s/garbage", root);
    snprintf(cut, sizeof(cut), "%s/cut", root);
    FILE *f = fopen(garbage, "wb");
    KT_REQUIRE(f != NULL);
    fputs("this is not a frame of kiln's isolation channel\n", f);
    fclose(f);
    /* A valid head (HELLO of 40 bytes) and no body. */
    f = fopen(cut, "wb");
    KT_REQUIRE(f != NULL);
    const unsigned char head[16] = {'K', 'I', 'W', '1', 1, 0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0};
    fwrite(head, 1, sizeof(head), f);
    fclose(f);
    struct run *r = calloc(1, sizeof(*r));
    KT_REQUIRE(r != NULL);
    KT_REQUIRE(run_kiln(NULL, garbage, (const char *[]){"__worker", NULL}, r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_CHECK(strstr(r->err, "malformed") != NULL);
    KT_REQUIRE(run_kiln(NULL, cut, (const char *[]){"__worker", NULL}, r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_REQUIRE(run_kiln(NULL, NULL, (const char *[]){"__worker", NULL}, r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_CHECK_EQ(r->err[0], '\0');
    /* --timeout-ms: only with --isolate, and above 0. */
    KT_REQUIRE(run_kiln(NULL, NULL,
                        (const char *[]){"prepare", "--timeout-ms", "5", "--no-vulkan", NULL},
                        r) == 0);
    KT_CHECK_EQ(exit_code(r), 2);
    KT_CHECK(strstr(r->err, "--timeout-ms goes with --isolate") != NULL);
    KT_REQUIRE(run_kiln(NULL, NULL,
                        (const char *[]){"prepare", "--isolate", "--timeout-ms", "0", NULL},
                        r) == 0);
    KT_CHECK_EQ(exit_code(r), 2);
    /* Not a public command: not in the help. */
    KT_REQUIRE(run_kiln(NULL, NULL, (const char *[]){"--help", NULL}, r) == 0);
    KT_CHECK(strstr(r->out, "__worker") == NULL);
    free(r);
}

/* The library refuses isolation without a worker command, and with an
 * on_pipeline callback (pipelines built elsewhere cannot be handed over). */
KT_CASE(isolate_options_checked)
{
    char cache[4200];
    snprintf(cache, sizeof(cache), "%s/cache", kt_case_dir());
    struct kiln_program_array arr = {.size = sizeof(arr), .programs = NULL, .count = 1};
    struct kiln_program_source src = kiln_program_source_array(&arr);
    struct kiln_isolate_options iso = {.size = sizeof(iso), .argv = NULL};
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    o.cache_dir = cache;
    o.source = &src;
    o.isolate = &iso;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    kiln_log_set_level(KILN_LOG_ERROR);
    KT_CHECK_EQ(kiln_prepare(&o, NULL, NULL, &s), KILN_EINVAL);
    KT_CHECK_EQ(s.step, KILN_PREP_STEP_INPUT);
    KT_CHECK_EQ(file_size(cache), -1); /* refused before anything was made */
    KT_CHECK(strcmp(kiln_errname(KILN_ECRASH), "KILN_ECRASH") == 0);
    KT_CHECK(strcmp(kiln_errname(KILN_ETIMEDOUT), "KILN_ETIMEDOUT") == 0);
}

/* ---- an application's worker, through the library ------------------------ */

static const char COMP[] = "#version 450\n"
                           "layout(local_size_x = 1) in;\n"
                           "layout(set = 0, binding = 0) buffer B { uint data[]; };\n"
                           "layout(push_constant) uniform P { uvec4 args; };\n"
                           "void main() { data[0] = args.x; }\n";

/* COMP translated to SPIR-V, in *w (kiln_words_free); *w stays NULL on a
 * failure, which the case's check reports. */
static void comp_spirv(uint32_t **w, size_t *n)
{
    struct kiln_glsl *g = NULL;
    KT_REQUIRE_OK(kiln_glsl_create(KILN_GLSL_OPT_NONE, &g));
    struct kiln_source src = {
        .stage = KILN_VK_STAGE_COMPUTE_BIT, .text = COMP, .size = strlen(COMP), .name = "comp"};
    KT_CHECK_OK(kiln_translate(kiln_glsl_translator(g), &src, w, n));
    kiln_glsl_destroy(g);
}

/* A compute program of the application's kind with `mode` as its state. */
static void app_program(struct kiln_program *p, const char *name, const uint32_t *w, size_t n,
                        uint32_t mode, size_t state_size)
{
    *p = (struct kiln_program)KILN_PROGRAM_INIT;
    static struct kiln_program_stage stages[8];
    static unsigned used;
    struct kiln_program_stage *st = &stages[used++];
    st->src.stage = KILN_VK_STAGE_COMPUTE_BIT;
    st->src.name = name;
    st->words = (uint32_t *)(uintptr_t)w;
    st->nwords = n;
    p->name = (char *)(uintptr_t)name;
    p->nstages = 1;
    p->stages = st;
    p->state_kind = KILN_STATE_APP;
    p->state = calloc(1, state_size);
    memcpy(p->state, &mode, 4);
    p->state_size = state_size;
}

/*
 * kiln_prepare through the library with isolate set and an application's
 * own worker executable (isolate_app_worker.c) holding the builder: the
 * built program is built, the skipped one skipped with the worker's
 * reason, the failing one failed, the crashing one failed with its worker
 * replaced, each counted under the application's kind.
 */
KT_CASE(app_builder_in_workers)
{
    pf_need_vulkan();
    uint32_t *w = NULL;
    size_t n = 0;
    comp_spirv(&w, &n);
    KT_REQUIRE(w != NULL);
    /* The crashing one has the largest payload, so it is built first (the
     * largest go first) and the others run on the worker that replaced it. */
    struct kiln_program progs[4];
    app_program(&progs[0], "app-built", w, n, 0, 4);
    app_program(&progs[1], "app-skipped", w, n, 1, 4);
    app_program(&progs[2], "app-failed", w, n, 2, 4);
    app_program(&progs[3], "app-crashed", w, n, 3, 4096);
    struct kiln_program_array arr = {
        .size = sizeof(arr), .programs = progs, .count = 4, .stamp = 11};
    struct kiln_program_source ps = kiln_program_source_array(&arr);
    const char *argv[] = {KILN_APP_WORKER, NULL};
    struct kiln_isolate_options iso = {.size = sizeof(iso), .argv = argv, .workers = 1};
    char cache[4200];
    snprintf(cache, sizeof(cache), "%s/cache", kt_case_dir());
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    o.cache_dir = cache;
    o.source = &ps;
    o.jobs = 1;
    o.isolate = &iso;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    kiln_log_set_level(KILN_LOG_ERROR); /* the expected failures are not news */
    KT_CHECK_OK(kiln_prepare(&o, NULL, NULL, &s));
    kiln_log_set_level(KILN_LOG_WARN);
    KT_CHECK_EQ(s.kinds[KILN_STATE_APP].built, 1);
    KT_CHECK_EQ(s.kinds[KILN_STATE_APP].skipped, 1);
    KT_CHECK_EQ(s.kinds[KILN_STATE_APP].failed, 2);
    KT_CHECK(strstr(s.kinds[KILN_STATE_APP].skip_reason, "app: mode 1 not offered here") != NULL);
    KT_CHECK_EQ(s.pipelines_built, 1);
    KT_CHECK_EQ(s.pipelines_failed, 2);
    KT_CHECK_EQ(s.pipelines_skipped, 1);
    for (int i = 0; i < 4; i++)
        free(progs[i].state);
    kiln_words_free(w);
}

/* The parent's builder for the application's kind: never builds (the
 * workers do), it only says which extensions a program needs: mode 5 both
 * (VK_KHR_pipeline_library and GPL, as isolate_app_worker.c lists them),
 * any other none. */
static uint64_t app_needed(void *user, const void *state, size_t size)
{
    (void)user;
    uint32_t mode = 0;
    if (size >= 4)
        memcpy(&mode, state, 4);
    return mode == 5 ? 3u : 0u;
}

static int app_not_here(void *user, struct kiln_build_request *req)
{
    (void)user;
    (void)req; /* no Vulkan headers here: the request stays opaque */
    return KILN_EINVAL;
}

/* One isolated kiln_prepare of `prog` into a new cache folder `leaf`, the
 * parent holding `builders`. @return the skip reason of the application's
 * kind (static). */
static const char *isolated_skip(const char *leaf, struct kiln_program *prog,
                                 const struct kiln_builder *builders, size_t nbuilders)
{
    struct kiln_program_array arr = {
        .size = sizeof(arr), .programs = prog, .count = 1, .stamp = 11};
    struct kiln_program_source ps = kiln_program_source_array(&arr);
    const char *argv[] = {KILN_APP_WORKER, NULL};
    struct kiln_isolate_options iso = {.size = sizeof(iso), .argv = argv, .workers = 1};
    char cache[4200];
    snprintf(cache, sizeof(cache), "%s/%s", kt_case_dir(), leaf);
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    o.cache_dir = cache;
    o.source = &ps;
    o.jobs = 1;
    o.isolate = &iso;
    o.builders = builders;
    o.nbuilders = nbuilders;
    static struct kiln_prepare_summary s;
    s.size = sizeof(s);
    kiln_log_set_level(KILN_LOG_ERROR);
    KT_CHECK_OK(kiln_prepare(&o, NULL, NULL, &s));
    kiln_log_set_level(KILN_LOG_WARN);
    KT_CHECK_EQ(s.kinds[KILN_STATE_APP].skipped, 1);
    fprintf(stderr, "%s: %s\n", leaf, s.kinds[KILN_STATE_APP].skip_reason);
    return s.kinds[KILN_STATE_APP].skip_reason;
}

/*
 * Isolated workers enable the extensions the parent's builders found the
 * programs need, sent in the greeting: a program needing none sees
 * VK_EXT_graphics_pipeline_library off in its worker, one needing it sees
 * it on, and with no builder in the parent (the worker's own are code the
 * parent lacks) the worker enables every extension its builder lists.
 */
KT_CASE(extensions_in_workers)
{
    pf_need_vulkan();
    struct kiln_vk *probe = NULL;
    static const char *const exts[] = {"VK_KHR_pipeline_library",
                                       "VK_EXT_graphics_pipeline_library"};
    struct kiln_vk_options vo = {
        .size = sizeof(vo), .extra_extensions = exts, .extra_extension_count = 2};
    KT_REQUIRE_OK(kiln_vk_create(&vo, &probe));
    bool offered = kiln_vk_extension_enabled(probe, exts[1]);
    kiln_vk_destroy(probe);
    if (!offered) {
        fprintf(stderr, "the device does not offer %s: nothing to tell\n", exts[1]);
        return;
    }
    uint32_t *w = NULL;
    size_t n = 0;
    comp_spirv(&w, &n);
    KT_REQUIRE(w != NULL);
    struct kiln_program none, needs;
    app_program(&none, "app-needs-none", w, n, 4, 4);
    app_program(&needs, "app-needs-gpl", w, n, 5, 4);
    struct kiln_builder parent = {.size = sizeof(parent),
                                  .kind = KILN_STATE_APP,
                                  .build = app_not_here,
                                  .name = "app",
                                  .device_extensions = exts,
                                  .ndevice_extensions = 2,
                                  .extensions_needed = app_needed};
    KT_CHECK(strcmp(isolated_skip("none", &none, &parent, 1), "app: GPL off") == 0);
    KT_CHECK(strcmp(isolated_skip("needs", &needs, &parent, 1), "app: GPL on") == 0);
    KT_CHECK(strcmp(isolated_skip("unknown", &none, NULL, 0), "app: GPL on") == 0);
    free(none.state);
    free(needs.state);
    kiln_words_free(w);
}

/* ---- a crash costs one run: the crash journal ------------------------------ */

/* The victim's key as the warm start names it ("program <hex>"), in out. */
static void victim_key_name(char *out, size_t cap)
{
    struct kiln_program *p = NULL;
    out[0] = '\0';
    KT_REQUIRE_OK(kiln_generate_program(KILN_GENERATOR_DEFAULT_SEED, 5, &p));
    struct kiln_key k;
    KT_CHECK_OK(kiln_prep_program_key(p, &k));
    kiln_program_destroy(p);
    snprintf(out, cap, "program %016" PRIx64 "%016" PRIx64, k.hi, k.lo);
}

/* kiln `args` (NULL-terminated, at most 12) with " --json" and then
 * `extra` (NULL: none) appended. */
static int run_json(const char *fault, const char *const *args, const char *extra, struct run *r)
{
    const char *all[16];
    size_t n = 0;
    while (args[n] && n < 12) {
        all[n] = args[n];
        n++;
    }
    all[n++] = "--json";
    if (extra)
        all[n++] = extra;
    all[n] = NULL;
    return run_kiln(fault, NULL, all, r);
}

/*
 * One command (prepare or start, not isolated) through a crash, the fault
 * staying as a driver's bug would: the first run dies of it; the next
 * skips what was in flight (the victim, and maybe the program the other
 * worker was building) with one line each, builds the rest and exits 1;
 * the one after skips them by the ledger ("crashed before") and exits 0;
 * once the fault is gone --retry-failed builds them; and a clean run after
 * is not mistaken for a crash.
 * `victim` is the name the command logs the victim by.
 */
static void crash_costs_one_run(const char *const *cmd, const char *victim, bool start)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    char fault[160], line[256];
    snprintf(fault, sizeof(fault), "crash:%s", victim);
    /* Named by its key, as every run names a program, with the source's
     * own name after it where the command has one (prepare). */
    char key_name[64];
    victim_key_name(key_name, sizeof(key_name));
    if (start)
        snprintf(line, sizeof(line), "%s: not built: it was being built when an earlier run",
                 key_name);
    else
        snprintf(line, sizeof(line), "%s (%s): not built: it was being built when an earlier run",
                 key_name, victim);
    KT_REQUIRE(run_json(fault, cmd, NULL, r) == 0);
    KT_REQUIRE(WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGSEGV);

    KT_REQUIRE(run_json(fault, cmd, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    int64_t suspects = kt_json_text_int(r->out, "crash_skipped");
    KT_CHECK(suspects >= 1 && suspects <= 2); /* two workers: one or two in flight */
    KT_CHECK(strstr(r->err, line) != NULL);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS - suspects);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 0);

    KT_REQUIRE(run_json(fault, cmd, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "crash_skipped"), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_failed"), suspects);
    KT_CHECK_EQ(kt_json_text_int(r->out, start ? "pipelines_built" : "driver_compiles"),
                start ? NPROGRAMS - suspects : 0);
    KT_CHECK(strstr(r->err, line) == NULL);

    KT_REQUIRE(run_json(NULL, cmd, "--retry-failed", r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), start ? NPROGRAMS : suspects);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_failed"), 0);

    KT_REQUIRE(run_json(NULL, cmd, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "crash_skipped"), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_failed"), 0);
    case_end(&c);
}

KT_CASE(crash_costs_one_prepare)
{
    char cache[4200];
    snprintf(cache, sizeof(cache), "%s/cache", kt_case_dir());
    const char *cmd[] = {"prepare", "--generate", PROGRAMS, "--cache", cache, "--jobs", "2", NULL};
    crash_costs_one_run(cmd, VICTIM, false);
}

KT_CASE(crash_costs_one_start)
{
    need_faults();
    pf_need_vulkan();
    char cache[4200], victim[64];
    snprintf(cache, sizeof(cache), "%s/cache", kt_case_dir());
    victim_key_name(victim, sizeof(victim));
    struct run *r = calloc(1, sizeof(*r));
    KT_REQUIRE(r != NULL);
    KT_REQUIRE(run_kiln(NULL, NULL,
                        (const char *[]){"prepare", "--generate", PROGRAMS, "--cache", cache,
                                         "--no-vulkan", NULL},
                        r) == 0);
    KT_REQUIRE(exit_code(r) == 0);
    free(r);
    const char *cmd[] = {"start", "--cache", cache, "--jobs", "2", NULL};
    crash_costs_one_run(cmd, victim, true);
}

/* An isolated start: the worker's crash fails the program (exit 1) and is
 * recorded in the ledger, so the next start skips it ("crashed before",
 * exit 0) and --retry-failed builds it. */
KT_CASE(isolated_start_records_crash)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    char victim[64], fault[96];
    victim_key_name(victim, sizeof(victim));
    snprintf(fault, sizeof(fault), "crash:%s", victim);
    KT_REQUIRE(run_kiln(NULL, NULL,
                        (const char *[]){"prepare", "--generate", PROGRAMS, "--cache", c.cache,
                                         "--no-vulkan", NULL},
                        r) == 0);
    KT_REQUIRE(exit_code(r) == 0);
    const char *cmd[] = {"start", "--cache", c.cache, "--jobs", "2", "--isolate", NULL};
    KT_REQUIRE(run_json(fault, cmd, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 1);
    KT_REQUIRE(run_json(fault, cmd, NULL, r) == 0); /* not handed to a worker again */
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_failed"), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS - 1);
    KT_CHECK(strstr(r->err, "1 program crashed a process or worker on this driver before") != NULL);
    KT_REQUIRE(run_json(NULL, cmd, "--retry-failed", r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_failed"), 0);
    case_end(&c);
}

/* ---- the ledger holds only the driver's word ------------------------------- */

/*
 * An isolated kiln_prepare of four programs whose worker never reaches the
 * driver (`argv` cannot start, or `fault` stops it before its greeting):
 * all four fail this run with no driver compile and nothing in the ledger;
 * the next run, with a worker that works, builds all four.
 */
static void unreached_case(const char *const *argv, const char *fault)
{
    if (fault)
        need_faults();
    pf_need_vulkan();
    char cache[4200], ledger[4300];
    snprintf(cache, sizeof(cache), "%s/cache", kt_case_dir());
    snprintf(ledger, sizeof(ledger), "%s/ledger.kpl", cache);
    struct kiln_isolate_options iso = {
        .size = sizeof(iso), .argv = argv, .workers = 1, .time_limit_ms = 2000};
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    pf_options(&o, cache, 1);
    o.isolate = &iso;
    struct pf_input in = PF_INPUT_INIT;
    in.generate = 4;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    if (fault)
        setenv("KILN_TEST_FAULT", fault, 1);
    kiln_log_set_level(KILN_LOG_ERROR); /* the expected failures are not news */
    KT_CHECK_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    unsetenv("KILN_TEST_FAULT");
    KT_CHECK_EQ(s.pipelines_built, 0);
    KT_CHECK_EQ(s.pipelines_failed, 4);
    KT_CHECK_EQ(s.driver_compiles, 0);
    KT_CHECK(file_size(ledger) <= 32); /* a header at most: no record */
    const char *good[] = {KILN_CLI, "__worker", NULL};
    iso.argv = good;
    iso.time_limit_ms = 0;
    KT_CHECK_OK(pf_prepare(&o, &in, NULL, NULL, &s));
    kiln_log_set_level(KILN_LOG_WARN);
    KT_CHECK_EQ(s.ledger_failed, 0);
    KT_CHECK_EQ(s.pipelines_built, 4);
    KT_CHECK_EQ(s.pipelines_failed, 0);
    KT_CHECK_EQ(s.driver_compiles, 4);
}

KT_CASE(worker_cannot_start)
{
    char missing[4200];
    snprintf(missing, sizeof(missing), "%s/no-such-worker", kt_case_dir());
    const char *argv[] = {missing, NULL};
    unreached_case(argv, NULL);
}

KT_CASE(worker_misses_greeting)
{
    const char *argv[] = {KILN_CLI, "__worker", NULL};
    unreached_case(argv, "hang:(greeting)");
}

/* ---- batches and the learned time limit ------------------------------------ */

/* The twelve programs in one batch, on one worker (--jobs 1): `tuning` is
 * $KILN_TEST_ISOLATE (kiln-faults, prep_fault.c), "batch=12" and more. */
static int prepare_batched(const char *cache, const char *fault, const char *tuning,
                           const char *timeout_ms, struct run *r)
{
    char env[128];
    snprintf(env, sizeof(env), "KILN_TEST_ISOLATE=%s", tuning);
    return prepare_jobs(cache, "1", fault, env, timeout_ms, r);
}

/* A member of the run's "isolated" object; -1 (a failure) when missing. */
static int64_t isolated(const struct run *r, const char *key)
{
    struct json_object *o = json_tokener_parse(r->out);
    char path[64];
    snprintf(path, sizeof(path), "isolated.%s", key);
    uint64_t v = o ? kt_json_num(o, path) : UINT64_MAX;
    json_object_put(o);
    if (v == UINT64_MAX)
        kt_fail(__FILE__, __LINE__, "no %s in the JSON", path);
    return v == UINT64_MAX ? -1 : (int64_t)v;
}

/* The programs after the victim in its batch, as its warning line counts
 * them ("the N programs after it in its batch"); 0 without such a line. */
static long resent_in_line(const char *err)
{
    const char *at = strstr(err, "(" VICTIM "): not built: ");
    const char *line_end = at ? strchr(at, '\n') : NULL;
    const char *n = at ? strstr(at, "; the ") : NULL;
    if (!n || (line_end && n > line_end))
        return 0;
    return strtol(n + strlen("; the "), NULL, 10);
}

/*
 * A worker that dies in the middle of a batch costs the program it was
 * building and nothing else: the victim fails, named alone; the programs
 * after it go to a new worker and are built, never blamed (the ledger
 * holds the victim alone: the next run compiles nothing and reports one
 * earlier failure). The control: the same batch without the fault is
 * built whole, nothing sent twice.
 */
KT_CASE(crash_mid_batch_blames_one)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    KT_REQUIRE(prepare_batched(c.cache, NULL, "batch=12", NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS);
    KT_CHECK_EQ(isolated(r, "batches"), 1);
    KT_CHECK_EQ(isolated(r, "resent"), 0);
    KT_CHECK_EQ(isolated(r, "workers"), 1);
    KT_CHECK(strstr(r->err, "go to another worker") == NULL);

    char cache[4300];
    snprintf(cache, sizeof(cache), "%s-crash", c.cache);
    KT_REQUIRE(prepare_batched(cache, "crash:" VICTIM, "batch=12", NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS - 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 1);
    KT_CHECK(strstr(r->err, "(" VICTIM "): not built: the worker process died") != NULL);
    KT_CHECK(strstr(r->err, "SIGSEGV") != NULL);
    /* The victim is not the batch's last (the generator's order): some
     * programs came after it, and each was sent again, once. */
    long after = resent_in_line(r->err);
    KT_CHECK(after >= 1 && after < NPROGRAMS);
    KT_CHECK_EQ(isolated(r, "resent"), after);
    KT_CHECK_EQ(isolated(r, "batches"), 2);
    KT_CHECK_EQ(isolated(r, "workers"), 2);
    KT_CHECK_EQ(isolated(r, "workers_started"), 2); /* the same count, its newer name */
    char vkc[4400];
    snprintf(vkc, sizeof(vkc), "%s/pipelines.vkc", cache);
    KT_CHECK(file_size(vkc) > 0);
    /* The ledger blames the victim alone. */
    KT_REQUIRE(prepare_batched(cache, NULL, "batch=12", NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "driver_compiles"), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_failed"), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_skipped"), NPROGRAMS);
    case_end(&c);
}

/*
 * With no --timeout-ms the limit is learned: after a few fast builds
 * (floor 1 s, from one build on: the test tuning) a hung build is killed
 * far sooner than the fixed 60 s, said so in its line, and not recorded
 * in the ledger (a guess, not the driver's word): the next run builds it.
 * The control: the same hang with an explicit --timeout-ms is killed at
 * that fixed limit, as before, and nothing is learned.
 */
KT_CASE(learned_limit_ends_hang_sooner)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    const char *tuning = "batch=12,floor=1000,samples=1";
    KT_REQUIRE(prepare_batched(c.cache, "hang:" VICTIM, tuning, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS - 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 1);
    KT_CHECK(strstr(r->err, "(" VICTIM "): not built: the worker passed its learned time limit") !=
             NULL);
    KT_CHECK_EQ(isolated(r, "early_timeouts"), 1);
    int64_t learned = isolated(r, "time_limit_ms");
    KT_CHECK(learned >= 1000 && learned < (int64_t)KILN_ISOLATE_DEFAULT_TIME_LIMIT_MS);
    KT_REQUIRE(prepare_batched(c.cache, NULL, tuning, NULL, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "ledger_failed"), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "driver_compiles"), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), 1);

    char cache[4300];
    snprintf(cache, sizeof(cache), "%s-fixed", c.cache);
    /* 8 s: a real build of this corpus passed 3 s under TSan on a loaded
     * two-core machine, and the control is about the hang alone. */
    KT_REQUIRE(prepare_batched(cache, "hang:" VICTIM, tuning, "8000", r) == 0);
    KT_CHECK_EQ(exit_code(r), 1);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_failed"), 1);
    KT_CHECK(strstr(r->err, "(" VICTIM "): not built: the worker passed its time limit and was "
                            "killed (8000 ms") != NULL);
    KT_CHECK(strstr(r->err, "learned") == NULL);
    KT_CHECK_EQ(isolated(r, "early_timeouts"), 0);
    KT_CHECK_EQ(isolated(r, "time_limit_ms"), 0);
    case_end(&c);
}

/* ---- parallel starts, sizing and teardown --------------------------------- */

/* The most workers whose start delays one run reports. */
#define MAX_STARTS 16

/* One worker's start delay, as the fault reports it on stderr. */
struct start_span {
    unsigned long long from, to; /* ms, kiln_now_ns's clock */
};

/* Reads the "start delay in process P from T0 to T1 ms" lines of `err`
 * into `out` (at most MAX_STARTS), in the order printed. @return how many. */
static size_t start_spans(const char *err, struct start_span *out)
{
    static const char tag[] = "start delay in process ";
    size_t n = 0;
    for (const char *at = strstr(err, tag); at && n < MAX_STARTS; at = strstr(at + 1, tag)) {
        unsigned long pid;
        if (sscanf(at + strlen(tag), "%lu from %llu to %llu ms", &pid, &out[n].from, &out[n].to) ==
            3)
            n++;
    }
    return n;
}

/* An isolated prepare of the twelve programs into `cache` on four workers
 * whatever the CPUs (`tuning` after "workers=4,"), with -v (the workers'
 * start and the caches merged are info lines). */
static int prepare_four(const char *cache, const char *tuning, struct run *r)
{
    char env[160];
    snprintf(env, sizeof(env), "KILN_TEST_ISOLATE=workers=4,%s", tuning);
    const char *args[] = {"-v",     "prepare", "--generate", PROGRAMS, "--cache", cache,
                          "--jobs", "4",       "--isolate",  "--json", NULL};
    return run_kiln_env(NULL, env, NULL, args, r);
}

/* The start delay of each worker, in ms: long against a lavapipe device
 * (about 30 ms), so that overlapping or not is the delays' doing. */
#define START_DELAY_MS 800

/*
 * Workers start in parallel: each of four workers sleeps START_DELAY_MS
 * in its start (the tuning's start_delay, standing in for a slow
 * driver's device creation) and the rule is told builds are heavy
 * (build_ms), so it wants all four at once. Every delay overlaps every
 * other (the last one began before the first one ended) and the four
 * together take well under 4 x the delay; every program is built and
 * every worker's pipeline cache merged (teardown lost nothing). The
 * negative control, one start at a time (serial=1): no two delays
 * overlap, and the starts take a delay each.
 */
KT_CASE(workers_start_in_parallel)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    char tuning[96];
    snprintf(tuning, sizeof(tuning), "build_ms=5000,start_delay=%d", START_DELAY_MS);
    KT_REQUIRE(prepare_four(c.cache, tuning, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS);
    KT_CHECK_EQ(isolated(r, "workers_started"), 4);
    /* Heavy builds: the rule starts all four with the run, before it
     * translates (isolate.c), and the phase greets those. */
    KT_CHECK_EQ(isolated(r, "workers_ready_at_phase"), 4);
    KT_CHECK(strstr(r->err, "merged 4 worker pipeline caches") != NULL);
    struct start_span sp[MAX_STARTS];
    size_t n = start_spans(r->err, sp);
    KT_CHECK_EQ(n, 4);
    /* Every delay began before any ended: all four at once (an order of
     * events, not a wall-clock bound, which a loaded machine would break). */
    unsigned long long last_from = 0, first_to = ~0ull;
    for (size_t i = 0; i < n; i++) {
        last_from = sp[i].from > last_from ? sp[i].from : last_from;
        first_to = sp[i].to < first_to ? sp[i].to : first_to;
    }
    KT_CHECK(n > 0 && last_from < first_to);

    char cache[4300];
    snprintf(cache, sizeof(cache), "%s-serial", c.cache);
    snprintf(tuning, sizeof(tuning), "build_ms=5000,start_delay=%d,serial=1", START_DELAY_MS);
    KT_REQUIRE(prepare_four(cache, tuning, r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS);
    n = start_spans(r->err, sp);
    KT_CHECK(n >= 2); /* a second start while the first worker builds */
    KT_CHECK_EQ(isolated(r, "workers_started"), (int64_t)n);
    KT_CHECK_EQ(isolated(r, "workers_ready_at_phase"), 0); /* serial: none early */
    for (size_t i = 1; i < n; i++)
        KT_CHECK(sp[i].from >= sp[i - 1].to); /* each after the one before */
    if (n >= 2)
        KT_CHECK(sp[n - 1].to - sp[0].from >= (unsigned long long)n * START_DELAY_MS);
    case_end(&c);
}

/*
 * The workers are sized for the work: twelve programs of about 100 ms on
 * lavapipe on four threads, against starts made slow (1.5 s each), pay
 * for fewer workers than threads (the rule: L x m / R >= 2 x S; here one
 * or two); the same programs said to be heavy (build_ms) get all four.
 * Both build everything. The cheap run says its 100 ms (build_ms=100)
 * rather than measure it: under TSan on a loaded machine the same builds
 * took over a second, and the rule then rightly wanted all four.
 */
KT_CASE(workers_sized_for_the_work_run)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    KT_REQUIRE(prepare_four(c.cache, "start_delay=1500,build_ms=100", r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS);
    int64_t cheap = isolated(r, "workers_started");
    KT_CHECK(cheap >= 1 && cheap < 4);

    char cache[4300];
    snprintf(cache, sizeof(cache), "%s-heavy", c.cache);
    KT_REQUIRE(prepare_four(cache, "start_delay=1500,build_ms=5000", r) == 0);
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS);
    KT_CHECK_EQ(isolated(r, "workers_started"), 4);
    case_end(&c);
}

/* The "the phase waited X ms" of each "worker P ready" line of `err` into
 * `out` (at most MAX_STARTS), in ms. @return how many. */
static size_t phase_waits(const char *err, double *out)
{
    static const char tag[] = "; the phase waited ";
    size_t n = 0;
    for (const char *at = strstr(err, tag); at && n < MAX_STARTS; at = strstr(at + 1, tag))
        if (sscanf(at + strlen(tag), "%lf ms", &out[n]) == 1)
            n++;
    return n;
}

/* The delay of every device in the greeting cases: longer than a worker's
 * own device takes (under TSan on a loaded two-core machine lavapipe's
 * took 1.2-1.8 s, and a worker greeted beside the parent still waited
 * more than 800 ms for it), so that the phase's waits tell early from
 * late greetings by the delays alone. */
#define GREET_DELAY_MS 2500

/* An isolated prepare (or, `start`, a warm start of the cache a plain
 * prepare made) on four early workers whose device creation and whose
 * parent's own device are slow alike (start_delay, vk_delay:
 * GREET_DELAY_MS each), `more` after those; r->err has the delays' spans
 * and the phase's waits. *device: the parent's span. @return 0 or -1. */
static int run_slow_devices(bool start, const char *cache, const char *more, struct run *r,
                            struct start_span *device)
{
    char tuning[128];
    snprintf(tuning, sizeof(tuning), "build_ms=5000,start_delay=%d,vk_delay=%d%s", GREET_DELAY_MS,
             GREET_DELAY_MS, more);
    if (!start) {
        if (prepare_four(cache, tuning, r) < 0)
            return -1;
    } else {
        const char *plain[] = {"prepare", "--generate", PROGRAMS, "--cache", cache, NULL};
        if (run_kiln_env(NULL, NULL, NULL, plain, r) < 0 || exit_code(r) != 0)
            return -1;
        char env[160];
        snprintf(env, sizeof(env), "KILN_TEST_ISOLATE=workers=4,%s", tuning);
        const char *args[] = {"-v", "start",     "--cache", cache, "--jobs",
                              "4",  "--isolate", "--json",  NULL};
        if (run_kiln_env(NULL, env, NULL, args, r) < 0)
            return -1;
    }
    const char *at = strstr(r->err, "device delay in process ");
    unsigned long pid;
    if (!at || sscanf(at, "device delay in process %lu from %llu to %llu ms", &pid, &device->from,
                      &device->to) != 3)
        return -1;
    return 0;
}

/* The checks of workers_greeted_beside_parent_device and its warm-start
 * twin: greeted before the parent's device was made and found ready by
 * the phase (late: after it, and each waited for). */
static void check_greetings(struct run *r, const struct start_span *dev, bool late)
{
    struct start_span sp[MAX_STARTS];
    double wait[MAX_STARTS];
    KT_CHECK_EQ(exit_code(r), 0);
    KT_CHECK_EQ(kt_json_text_int(r->out, "pipelines_built"), NPROGRAMS);
    if (!late)
        KT_CHECK_EQ(isolated(r, "workers_ready_at_phase"), 4);
    size_t n = start_spans(r->err, sp);
    KT_CHECK_EQ(n, 4);
    for (size_t i = 0; i < n; i++)
        KT_CHECK(late ? sp[i].from >= dev->to : sp[i].from < dev->to);
    size_t nw = phase_waits(r->err, wait);
    KT_CHECK_EQ(nw, 4);
    for (size_t i = 0; i < nw; i++)
        KT_CHECK(late ? wait[i] >= GREET_DELAY_MS : wait[i] < GREET_DELAY_MS);
}

/* One greeting case: kiln prepare's, or (start) kiln start's on the cache
 * a plain prepare made; early, then with late_greeting=1 (the control). */
static void greeted_case(bool start)
{
    struct isolate_case c;
    KT_REQUIRE(case_begin(&c, true));
    struct run *r = c.r;
    struct start_span dev;
    KT_REQUIRE(run_slow_devices(start, c.cache, "", r, &dev) == 0);
    check_greetings(r, &dev, false);
    if (start)
        KT_CHECK_EQ(isolated(r, "workers_started"), 4);

    char cache[4300];
    snprintf(cache, sizeof(cache), "%s-late", c.cache);
    KT_REQUIRE(run_slow_devices(start, cache, ",late_greeting=1", r, &dev) == 0);
    check_greetings(r, &dev, true); /* greeted by the phase, after the parent's device */
    case_end(&c);
}

/*
 * Early workers are greeted beside the parent's own device (issue 28):
 * with every device slow (GREET_DELAY_MS in each worker after its
 * greeting and in kiln_prepare's own device, a slow driver's), each
 * worker's delay began before the parent's device was made, and the
 * pipelines phase waits for no worker's delay: each READY is read less
 * than a delay after the phase asked. The negative control
 * (late_greeting=1, the phase greets them as before): every worker's
 * delay begins after the parent's device, and the phase waits at least a
 * delay for each worker.
 */
KT_CASE(workers_greeted_beside_parent_device)
{
    greeted_case(false);
}

/*
 * The same for a warm start: kiln start --isolate starts its workers
 * beside the reading of the records and greets them beside its own
 * device, begun beside the reading too (the parent's delay is in that
 * device's making, so it ran at all only if the context was begun early).
 * The control (late_greeting=1): greeted by the phase, each waited for.
 */
KT_CASE(start_workers_greeted_beside_parent_device)
{
    greeted_case(true);
}

KT_MAIN(KT_ENTRY(isolated_builds_all), KT_ENTRY(worker_crash),
        KT_ENTRY(crasher_skipped_then_retried), KT_ENTRY(worker_abort), KT_ENTRY(worker_hang),
        KT_ENTRY(orphan_worker_dies), KT_ENTRY(group_interrupt_spares_workers),
        KT_ENTRY(warm_start_worker_crash), KT_ENTRY(crash_without_isolation),
        KT_ENTRY(worker_bad_input), KT_ENTRY(isolate_options_checked),
        KT_ENTRY(app_builder_in_workers), KT_ENTRY(extensions_in_workers),
        KT_ENTRY(crash_costs_one_prepare), KT_ENTRY(crash_costs_one_start),
        KT_ENTRY(isolated_start_records_crash), KT_ENTRY(worker_cannot_start),
        KT_ENTRY(worker_misses_greeting), KT_ENTRY(crash_mid_batch_blames_one),
        KT_ENTRY(learned_limit_ends_hang_sooner), KT_ENTRY(workers_start_in_parallel),
        KT_ENTRY(workers_sized_for_the_work_run), KT_ENTRY(workers_greeted_beside_parent_device),
        KT_ENTRY(start_workers_greeted_beside_parent_device))

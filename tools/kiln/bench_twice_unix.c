/*
 * bench_twice_unix.c - the compile-once part of `kiln bench prepare`: the same
 * generated programs prepared twice into one new cache folder, the second
 * run answered by the build ledger and pipelines.vkc.
 *
 * Both runs are whole kiln_prepare calls, each with a Vulkan context of its
 * own (the second loads the pipelines.vkc the first saved), in a child
 * process (bench_child_run) so the parent's measurements never share a
 * driver with them. The drivers' own disk caches are turned off in the
 * child (bench_child_no_disk_cache), so what the second run saves is
 * kiln's doing. The figures that count are the driver compiles of each
 * run and the ratio of their pipelines phases; the translate phase of the
 * second run (nothing to translate) is shown too.
 */
#include "bench_child.h"
#include "cli.h"
#include "commands.h"

#include <string.h>

/* Runs one prepare of `n` generated programs into `dir`. */
static int prepare_once(const char *dir, unsigned n, uint64_t seed, unsigned jobs,
                        struct kiln_prepare_summary *s)
{
    struct kiln_generator g = {.seed = seed, .count = n};
    struct kiln_program_source src;
    kiln_generator_source(&g, &src);
    struct kiln_glsl *glsl = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &glsl);
    if (rc < 0)
        return rc;
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    o.cache_dir = dir;
    o.source = &src;
    o.translator = kiln_glsl_translator(glsl);
    o.jobs = jobs;
    rc = kiln_prepare(&o, NULL, NULL, s);
    kiln_glsl_destroy(glsl);
    return rc;
}

/* What the child is given. */
struct twice_args {
    const char *dir;
    unsigned n, jobs;
    uint64_t seed;
};

/* In the child (bench_child_run): both prepares, their figures into *result. */
static void twice_child(void *arg, void *result)
{
    const struct twice_args *a = arg;
    struct bench_twice *r = result;
    bench_child_no_disk_cache();
    struct kiln_prepare_summary s[2] = {KILN_PREPARE_SUMMARY_INIT, KILN_PREPARE_SUMMARY_INIT};
    int rc = prepare_once(a->dir, a->n, a->seed, a->jobs, &s[0]);
    if (rc == KILN_OK)
        rc = prepare_once(a->dir, a->n, a->seed, a->jobs, &s[1]);
    *r = (struct bench_twice){.programs = a->n, .error = rc};
    for (int i = 0; i < 2 && rc == KILN_OK; i++) {
        r->pipelines_s[i] = (double)s[i].pipelines_ns / 1e9;
        r->translate_s[i] = (double)s[i].translate_ns / 1e9;
        r->total_s[i] = (double)s[i].total_ns / 1e9;
        r->driver_compiles[i] = s[i].driver_compiles;
        r->ledger_skipped[i] = s[i].ledger_skipped;
        r->built[i] = s[i].pipelines_built;
        r->failed[i] = s[i].pipelines_failed;
    }
}

int bench_prepare_twice(const char *name, unsigned n, uint64_t seed, unsigned jobs,
                        struct bench_twice *out)
{
    memset(out, 0, sizeof(*out));
    out->programs = n;
    char dir[CLI_PATH_MAX];
    if (bench_tmpdir(name, "bench-twice", dir, sizeof(dir)) < 0)
        return KILN_EIO;
    struct twice_args a = {.dir = dir, .n = n, .jobs = jobs, .seed = seed};
    int rc = bench_child_run(name, "the compile-once run (a child process)", twice_child, &a, out,
                             sizeof(*out));
    if (rc == KILN_OK && out->error < 0) {
        cli_error(name, "the compile-once run failed: %s", kiln_strerror(out->error));
        rc = out->error;
    }
    bench_remove_tree(dir);
    return rc;
}

/*
 * bench_twice_unix.c - the compile-once part of `kiln bench prepare`: the same
 * generated programs prepared twice into one new cache folder, the second
 * run answered by the build ledger and pipelines.vkc.
 *
 * Both runs are whole kiln_prepare calls, each with a Vulkan context of its
 * own (the second loads the pipelines.vkc the first saved), in a child
 * process so the parent's measurements never share a driver with them.
 * The drivers' own disk caches are turned off in the child
 * (MESA_SHADER_CACHE_DISABLE, __GL_SHADER_DISK_CACHE), so what the second
 * run saves is kiln's doing. The figures that count are the driver
 * compiles of each run and the ratio of their pipelines phases; the
 * translate phase of the second run (nothing to translate) is shown too.
 */
#include "bench_child.h"
#include "cli.h"
#include "commands.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>
#include <unistd.h>

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

int bench_prepare_twice(const char *name, unsigned n, uint64_t seed, unsigned jobs,
                        struct bench_twice *out)
{
    memset(out, 0, sizeof(*out));
    out->programs = n;
    char dir[CLI_PATH_MAX];
    if (bench_tmpdir(name, "bench-twice", dir, sizeof(dir)) < 0)
        return KILN_EIO;
    int fds[2];
    if (pipe(fds) != 0) {
        rmdir(dir);
        return KILN_EIO;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
        setenv("__GL_SHADER_DISK_CACHE", "0", 1);
        struct kiln_prepare_summary s[2] = {KILN_PREPARE_SUMMARY_INIT, KILN_PREPARE_SUMMARY_INIT};
        int rc = prepare_once(dir, n, seed, jobs, &s[0]);
        if (rc == KILN_OK)
            rc = prepare_once(dir, n, seed, jobs, &s[1]);
        struct bench_twice r = {.programs = n, .error = rc};
        for (int i = 0; i < 2 && rc == KILN_OK; i++) {
            r.pipelines_s[i] = (double)s[i].pipelines_ns / 1e9;
            r.translate_s[i] = (double)s[i].translate_ns / 1e9;
            r.total_s[i] = (double)s[i].total_ns / 1e9;
            r.driver_compiles[i] = s[i].driver_compiles;
            r.ledger_skipped[i] = s[i].ledger_skipped;
            r.built[i] = s[i].pipelines_built;
            r.failed[i] = s[i].pipelines_failed;
        }
        ssize_t w = write(fds[1], &r, sizeof(r));
        _exit(w == (ssize_t)sizeof(r) ? 0 : 1);
    }
    close(fds[1]);
    int rc = KILN_OK;
    if (pid < 0) {
        rc = KILN_EIO;
    } else {
        ssize_t got = read(fds[0], out, sizeof(*out));
        int status = 0;
        waitpid(pid, &status, 0);
        if (got != (ssize_t)sizeof(*out) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            cli_error(name, "the compile-once run (child process) did not report");
            rc = KILN_EIO;
        } else if (out->error < 0) {
            cli_error(name, "the compile-once run failed: %s", kiln_strerror(out->error));
            rc = out->error;
        }
    }
    close(fds[0]);
    bench_remove_tree(dir);
    return rc;
}

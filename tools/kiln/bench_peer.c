/*
 * bench_peer.c - `kiln bench peer`: kiln against Fossilize's own replayer
 * (fossilize-replay, built from its source), like with like: the same
 * archives, the same measure (the whole process), one run.
 *
 * Design. For each thread count the peer and then kiln run as child
 * processes (bench_peer_unix.c), each cold: the drivers' disk caches off
 * through the environment (PEER_ENV), no pipeline cache given to the peer,
 * a new cache folder for kiln (so its build ledger and pipelines.vkc answer
 * nothing). The commands are
 *
 *   PEER --num-threads N [--master-process] ARCHIVES...
 *   kiln prepare --corpus ARCHIVES... --cache NEW --jobs N [--isolate] --json
 *
 * and both are printed, as run, so a figure can be cited with its command.
 * What is measured of each:
 *
 * - time: the wall clock from the spawn to the reaped exit (start-up,
 *   reading and parsing the archives, the Vulkan device, every pipeline,
 *   kiln's storing and saving: everything each tool does for the command);
 * - memory: wait4's ru_maxrss, the kernel's high-water mark of the process,
 *   which for a tree is the largest single process (Linux keeps the
 *   largest of the reaped descendants); that is the whole tree for the
 *   threaded runs (one process each). For --isolate / --master-process the
 *   tree's summed PSS is also sampled every 5 ms (tree_peak_bytes), and
 *   that is the figure compared;
 * - pipelines: the peer's "Replayed ... objects" blocks (graphics + compute
 *   + ray tracing, summed over its processes), kiln's --json counts
 *   (built + skipped + failed). Both replay each distinct pipeline of the
 *   archives once; the peer also replays samplers, layouts, render passes
 *   and modules, which neither count holds. The counts are compared, not
 *   the sets: same_pipelines says the totals agree.
 *
 * The ratios are the peer's over kiln's (time, memory), so above 1 kiln
 * is faster or smaller. This file is portable: options, the peer's summary,
 * the report. Starting processes is bench_peer_unix.c's; Windows says the
 * command is not available.
 */
#include "bench_peer.h"
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: %s --peer PATH [--threads LIST] [--isolate] [--warmup] [--device N]\n"
    "          [--json] ARCHIVE.foz...\n"
    "       %s --peer PATH --generate N [--seed S] [--keep-archive PATH] ...\n"
    "\n"
    "Fossilize's replayer against kiln, like with like: for each thread count,\n"
    "PATH --num-threads N ARCHIVES... and kiln prepare --corpus ARCHIVES...\n"
    "--jobs N, each a fresh process (kiln into a new cache) with the drivers'\n"
    "disk caches off, one after the other in one run. Prints per count both\n"
    "tools' wall time and peak memory of the whole process, the ratios (the\n"
    "peer's over kiln's) and the pipelines each replayed, with each command.\n"
    "\n"
    "  --peer PATH     the fossilize-replay executable (built from its source)\n"
    "  --threads LIST  thread counts, comma-separated (default 1 and the\n"
    "                  usable CPUs)\n"
    "  --isolate       also run each count with the builds in processes of\n"
    "                  their own: the peer with --master-process, kiln with\n"
    "                  --isolate (memory: the tree's summed PSS, sampled)\n"
    "  --generate N    N programs of kiln's generator, written first as one\n"
    "                  archive (kiln_foz_export), given to both tools\n"
    "  --seed S        the generator's seed (default: a new one per run)\n"
    "  --keep-archive PATH  keep the generated archive at PATH\n"
    "  --warmup        run each tool once, unmeasured, before the first count\n"
    "                  (the driver's files and the archives in the page cache)\n"
    "  --device N      the Vulkan device by index (both tools)\n"
    "  --json          one JSON object on stdout\n"
    "  --help          this text\n"
    "\n"
    "Exit codes: 0 done, 1 a run failed (exit code not 0, or its counts\n"
    "unreadable; the report is printed), 2 bad usage.\n";

/* ---- the peer's summary ---------------------------------------------------- */

/* @return the number after `key` and the spaces that follow it in `line`,
 * or -1 when the line does not hold `key` so. */
static int64_t count_after(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    if (!p)
        return -1;
    p += strlen(key);
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    return (int64_t)strtoull(p, NULL, 10);
}

void bench_peer_parse_summary(const char *text, struct peer_counts *out)
{
    memset(out, 0, sizeof(*out));
    /* "Playing back 110 graphics pipelines took ..." never matches: the
     * keys end with the colon of the summary's lines. */
    static const char *const keys[] = {
        "graphics pipelines:", "compute pipelines:", "raytracing pipelines:"};
    uint64_t *slot[] = {&out->graphics, &out->compute, &out->raytracing};
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        char buf[256];
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len >= sizeof(buf))
            len = sizeof(buf) - 1;
        memcpy(buf, line, len);
        buf[len] = '\0';
        if (strstr(buf, "Replayed ") && strstr(buf, " objects in "))
            out->summaries++;
        for (size_t k = 0; k < CLI_ARRAY_LEN(keys) && out->summaries; k++) {
            int64_t v = count_after(buf, keys[k]);
            if (v >= 0)
                *slot[k] += (uint64_t)v;
        }
        line = nl ? nl + 1 : NULL;
    }
}

/* ---- command lines ------------------------------------------------------------ */

int bench_peer_quote(char **line, const char *arg)
{
    size_t old = *line ? strlen(*line) : 0;
    size_t need = old + 1 + 4 * strlen(arg) + 3;
    char *p = realloc(*line, need);
    if (!p)
        return KILN_ENOMEM;
    *line = p;
    p += old;
    if (old)
        *p++ = ' ';
    bool plain = *arg != '\0';
    for (const char *a = arg; *a && plain; a++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./,:=+@%-",
                       *a) != NULL;
    if (plain) {
        strcpy(p, arg);
        return KILN_OK;
    }
    *p++ = '\'';
    for (const char *a = arg; *a; a++) {
        if (*a == '\'') {
            memcpy(p, "'\\''", 4);
            p += 4;
        } else {
            *p++ = *a;
        }
    }
    *p++ = '\'';
    *p = '\0';
    return KILN_OK;
}

void bench_peer_run_free(struct peer_run *r)
{
    struct peer_side *sides[] = {&r->peer, &r->kiln};
    for (size_t k = 0; k < CLI_ARRAY_LEN(sides); k++) {
        free(sides[k]->command);
        free(sides[k]->short_command);
        sides[k]->command = sides[k]->short_command = NULL;
    }
}

void bench_peer_free(struct peer_bench *b)
{
    for (unsigned i = 0; i < b->nruns; i++)
        bench_peer_run_free(&b->runs[i]);
}

/* ---- the report ---------------------------------------------------------------- */

/* The memory compared: the sampled tree for a run of several processes,
 * else (or where no sample saw it alive: a process of a few ms) the
 * kernel's high-water mark of the one process. */
static uint64_t side_peak(const struct peer_run *r, const struct peer_side *s)
{
    return r->isolated && s->tree_peak_bytes ? s->tree_peak_bytes : s->maxrss_bytes;
}

static double ratio(double peer, double kiln)
{
    return kiln > 0 ? peer / kiln : 0;
}

static bool run_ok(const struct peer_run *r)
{
    return r->peer.exit_code == 0 && r->kiln.exit_code == 0 && r->peer.counted && r->kiln.counted;
}

static bool same_pipelines(const struct peer_run *r)
{
    return r->peer.counted && r->kiln.counted && r->peer.pipelines == r->kiln.pipelines;
}

static void json_side(struct cli_json *j, const char *key, const struct peer_run *r,
                      const struct peer_side *s, bool is_peer)
{
    cli_json_object_begin(j, key);
    cli_json_str(j, "command", s->command ? s->command : "");
    cli_json_i64(j, "exit_code", s->exit_code);
    cli_json_u64(j, "peak_rss_bytes", side_peak(r, s));
    cli_json_u64(j, "maxrss_bytes", s->maxrss_bytes);
    if (s->sampled)
        cli_json_u64(j, "tree_peak_bytes", s->tree_peak_bytes);
    else
        cli_json_null(j, "tree_peak_bytes");
    if (!s->counted) {
        cli_json_null(j, "pipelines");
    } else {
        cli_json_u64(j, "pipelines", s->pipelines);
        if (is_peer) {
            cli_json_u64(j, "graphics", s->kinds.graphics);
            cli_json_u64(j, "compute", s->kinds.compute);
            cli_json_u64(j, "raytracing", s->kinds.raytracing);
            cli_json_u64(j, "summaries", s->kinds.summaries);
        } else {
            cli_json_u64(j, "built", s->built);
            cli_json_u64(j, "skipped", s->skipped);
            cli_json_u64(j, "failed", s->failed);
        }
    }
    cli_json_object_end(j);
}

static void json_run(struct cli_json *j, const struct peer_run *r)
{
    cli_json_object_begin(j, NULL);
    cli_json_u64(j, "threads", r->threads);
    cli_json_str(j, "mode", r->isolated ? "isolated" : "threads");
    cli_json_object_begin(j, "seconds");
    cli_json_double(j, "peer", (double)r->peer.wall_ns / 1e9);
    cli_json_double(j, "kiln", (double)r->kiln.wall_ns / 1e9);
    cli_json_object_end(j);
    json_side(j, "peer", r, &r->peer, true);
    json_side(j, "kiln", r, &r->kiln, false);
    cli_json_double(j, "speed_ratio", ratio((double)r->peer.wall_ns, (double)r->kiln.wall_ns));
    cli_json_double(j, "memory_ratio",
                    ratio((double)side_peak(r, &r->peer), (double)side_peak(r, &r->kiln)));
    cli_json_bool(j, "same_pipelines", same_pipelines(r));
    cli_json_object_end(j);
}

static void print_json(const struct peer_bench *b)
{
    struct cli_json j;
    cli_json_begin(&j);
    cli_json_str(&j, "peer", b->peer);
    cli_json_str(&j, "work", b->generate ? "generated" : "archives");
    cli_json_u64(&j, "archives", b->generate ? 1 : b->narchives);
    if (b->generate) {
        cli_json_str(&j, "archive", b->archive);
        cli_json_u64(&j, "generated", b->generate);
        cli_json_u64(&j, "seed", b->seed);
    } else {
        cli_json_null(&j, "archive");
        cli_json_null(&j, "generated");
        cli_json_null(&j, "seed");
    }
    cli_json_str(&j, "environment", PEER_ENV);
    cli_json_bool(&j, "isolate", b->isolate);
    cli_json_bool(&j, "warmup", b->warmup);
    cli_json_str(&j, "peak_rss_method", "wait4 ru_maxrss; isolated: tree PSS sampled every 5 ms");
    bench_json_threads(&j, b->threads, b->nthreads);
    cli_json_array_begin(&j, "runs");
    for (unsigned i = 0; i < b->nruns; i++)
        json_run(&j, &b->runs[i]);
    cli_json_array_end(&j);
    cli_json_object_begin(&j, "seconds");
    if (b->generate)
        cli_json_double(&j, "generate", b->generate_s);
    for (unsigned i = 0; i < b->nruns; i++) {
        const struct peer_run *r = &b->runs[i];
        char key[64];
        const char *sfx = r->isolated ? "_isolated" : "";
        snprintf(key, sizeof(key), "peer_%ut%s", r->threads, sfx);
        cli_json_double(&j, key, (double)r->peer.wall_ns / 1e9);
        snprintf(key, sizeof(key), "kiln_%ut%s", r->threads, sfx);
        cli_json_double(&j, key, (double)r->kiln.wall_ns / 1e9);
    }
    cli_json_object_end(&j);
    cli_json_end(&j);
}

/* "116" or "?" when the run's counts were not read. */
static const char *count_text(char *buf, size_t cap, const struct peer_side *s)
{
    if (s->counted)
        snprintf(buf, cap, "%" PRIu64, s->pipelines);
    else
        snprintf(buf, cap, "?");
    return buf;
}

static void print_text(const struct peer_bench *b)
{
    if (b->generate)
        printf("kiln bench peer: %u generated programs (seed %" PRIu64 ") in %s\n", b->generate,
               b->seed, b->archive);
    else
        printf("kiln bench peer: %zu archive%s\n", b->narchives, CLI_S(b->narchives));
    printf("  peer: %s\n", b->peer);
    printf("  each run: a fresh process tree, one after the other, with %s;\n", PEER_ENV);
    printf("  time: wall clock of the whole process; memory: its peak resident set (wait4),\n"
           "  isolated runs: the process tree's summed PSS, sampled every 5 ms; ratios: "
           "peer / kiln\n");
    printf("\n  %-9s %7s %-8s %8s %9s %8s %9s %7s %7s  %s\n", "work", "threads", "mode", "peer s",
           "peer MiB", "kiln s", "kiln MiB", "speed", "memory", "pipelines peer/kiln");
    for (unsigned i = 0; i < b->nruns; i++) {
        const struct peer_run *r = &b->runs[i];
        char pc[24], kc[24];
        double pm = (double)side_peak(r, &r->peer) / (1024.0 * 1024.0);
        double km = (double)side_peak(r, &r->kiln) / (1024.0 * 1024.0);
        printf("  %-9s %7u %-8s %8.3f %9.1f %8.3f %9.1f %6.2fx %6.2fx  %s/%s%s\n",
               b->generate ? "generated" : "archives", r->threads,
               r->isolated ? "isolated" : "threads", (double)r->peer.wall_ns / 1e9, pm,
               (double)r->kiln.wall_ns / 1e9, km,
               ratio((double)r->peer.wall_ns, (double)r->kiln.wall_ns), ratio(pm, km),
               count_text(pc, sizeof(pc), &r->peer), count_text(kc, sizeof(kc), &r->kiln),
               same_pipelines(r) ? "" : "  (not the same count)");
    }
    bool shorten = !b->generate && b->narchives > 2;
    printf("\n  commands (environment: %s%s):\n", PEER_ENV,
           shorten ? "; ARCHIVES...: the archives given, in their order; --json has each in full"
                   : "");
    for (unsigned i = 0; i < b->nruns; i++) {
        const struct peer_run *r = &b->runs[i];
        const char *pc = shorten ? r->peer.short_command : r->peer.command;
        const char *kc = shorten ? r->kiln.short_command : r->kiln.command;
        printf("    peer: %s\n    kiln: %s\n", pc ? pc : "?", kc ? kc : "?");
        if (r->peer.exit_code != 0 || r->kiln.exit_code != 0)
            printf("    exit codes: peer %d, kiln %d\n", r->peer.exit_code, r->kiln.exit_code);
    }
}

/* ---- the command --------------------------------------------------------------- */

/* Reads the options into *b. @return 0, a usage exit code, or -1 after
 * --help was printed. */
static int parse_options(int argc, char **argv, struct peer_bench *b, bool *json)
{
    const char *name = argv[0];
    static const struct option longopts[] = {
        {"peer", required_argument, NULL, 'p'},
        {"threads", required_argument, NULL, 't'},
        {"isolate", no_argument, NULL, 'I'},
        {"generate", required_argument, NULL, 'g'},
        {"seed", required_argument, NULL, 's'},
        {"keep-archive", required_argument, NULL, 'k'},
        {"warmup", no_argument, NULL, 'W'},
        {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool seed_given = false;
    uint64_t v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = cli_getopt(argc, argv, ":", longopts)) != -1) {
        switch (c) {
        case 'p':
            CLI_TRY(cli_check_path(name, "--peer", optarg));
            b->peer = optarg;
            break;
        case 't':
            if (bench_parse_threads(name, optarg, b->threads, &b->nthreads))
                return KILN_EXIT_USAGE;
            break;
        case 'I':
            b->isolate = true;
            break;
        case 'g':
            if (cli_parse_u64(name, "--generate", optarg, 1, 1000000, false, &v))
                return KILN_EXIT_USAGE;
            b->generate = (uint32_t)v;
            break;
        case 's':
            if (cli_parse_seed(name, optarg, &b->seed))
                return KILN_EXIT_USAGE;
            seed_given = true;
            break;
        case 'k':
            CLI_TRY(cli_check_path(name, "--keep-archive", optarg));
            b->keep = optarg;
            break;
        case 'W':
            b->warmup = true;
            break;
        case 'd':
            if (cli_parse_device(name, optarg, &b->use_device, &b->device))
                return KILN_EXIT_USAGE;
            break;
        case 'J':
            *json = true;
            break;
        case 'h':
            printf(help, name, name);
            return -1;
        default:
            return cli_option_error(name, c, argv);
        }
    }
    if (!b->peer)
        return cli_usage_error(name, "expected --peer PATH (the fossilize-replay executable)");
    if (b->generate && optind < argc)
        return cli_usage_error(name, "--generate and archives exclude each other");
    if (!b->generate && optind >= argc)
        return cli_usage_error(name, "expected archives (ARCHIVE.foz...) or --generate N");
    if (!b->generate && (b->keep || seed_given))
        return cli_usage_error(name, "%s needs --generate", b->keep ? "--keep-archive" : "--seed");
    if (b->keep && kiln_cache_check_output(NULL, b->keep) == KILN_ECACHE_FILE) {
        cli_error(name, "--keep-archive: %s: in a kiln cache's folder: not written over", b->keep);
        return KILN_EXIT_USAGE;
    }
    if (b->generate && !seed_given && kiln_random_bytes(&b->seed, sizeof(b->seed)) < 0)
        b->seed = kiln_now_ns();
    b->archives = (const char *const *)argv + optind;
    b->narchives = (size_t)(argc - optind);
    return 0;
}

/* The default counts: 1 and the usable CPUs (the pool policy's count). */
static void default_threads(struct peer_bench *b)
{
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    kiln_pool_probe(NULL, NULL, &m);
    struct kiln_pool_limits none = KILN_POOL_LIMITS_INIT;
    struct kiln_pool_plan plan = KILN_POOL_PLAN_INIT;
    kiln_pool_policy(&m, &none, &plan);
    b->threads[b->nthreads++] = 1;
    if (plan.cpus > 1)
        b->threads[b->nthreads++] = plan.cpus;
}

int cmd_bench_peer(int argc, char **argv)
{
    struct peer_bench *b = calloc(1, sizeof(*b));
    if (!b) {
        cli_error(argv[0], "out of memory");
        return KILN_EXIT_FAILED;
    }
    b->name = argv[0];
    bool json = false;
    int ex = parse_options(argc, argv, b, &json);
    if (ex != 0) {
        free(b);
        return ex < 0 ? KILN_EXIT_OK : ex;
    }
    if (b->nthreads == 0)
        default_threads(b);
    b->quiet = json;
    int rc = bench_peer_measure(b);
    if (rc < 0) {
        cli_note_code(rc);
        ex = rc == KILN_EINVAL ? KILN_EXIT_USAGE : KILN_EXIT_FAILED;
    } else {
        if (json)
            print_json(b);
        else
            print_text(b);
        for (unsigned i = 0; i < b->nruns; i++)
            if (!run_ok(&b->runs[i]))
                ex = KILN_EXIT_FAILED;
        if (ex != KILN_EXIT_OK)
            cli_error(b->name, "a run failed or its pipelines could not be counted (see the "
                               "exit codes above, and each tool's output on stderr)");
    }
    bench_peer_free(b);
    free(b);
    return ex;
}

/*
 * bench_start.c - `kiln bench start`: what a warm start of a subset costs
 * (issue 27, "a warm start that loads only what it uses").
 *
 * Three warm starts, each in a forked child with its peak memory reset
 * (bench_child_unix.c), all without Vulkan (the load is what a subset saves):
 *
 * - subset: the N most recently used records of the large cache
 *   (kiln_start_options.recent);
 * - only:   every record of a cache that holds only those N (the baseline
 *   the subset is held to: the same records, nothing else beside them);
 * - whole:  every record of the large cache (what a start cost before).
 *
 * The figure is subset_vs_only, the subset's peak over the baseline's: a
 * large cache should cost memory for what is used, not for all. The two
 * caches are the caller's (see docs/bench-start.md for how to make them);
 * the bench writes to neither but last use (a start records it).
 *
 * With --binaries, two warm starts with Vulkan of one cache, each in a
 * child and read-only: from the host tier of driver binaries and from
 * pipelines.vkc (issue 27, point 4: measure before choosing the default):
 * time, peak memory, bytes on disk, and where the pipelines came from.
 */
#include "bench_child.h"
#include "cli.h"
#include "commands.h"

#include "kiln.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char help[] =
    "usage: %s --recent N --cache DIR --only DIR [--jobs N|auto] [--json]\n"
    "       %s --binaries --cache DIR [--no-driver-cache] [--isolate] [--jobs N|auto] [--json]\n"
    "\n"
    "A warm start of a subset against a cache that holds only that subset: three\n"
    "warm starts without Vulkan, each in a process of its own, peak memory and time\n"
    "of each: the N most recently used programs of the large cache (--cache), every\n"
    "program of a cache holding only those (--only), and every program of the large\n"
    "cache. The figure is the subset's peak over the small cache's.\n"
    "\n"
    "  --recent N      how many of the most recently used programs to start\n"
    "  --cache DIR     the large cache\n"
    "  --only DIR      a cache holding only those N programs\n"
    "  --jobs N|auto   read threads (default auto)\n"
    "  --binaries      instead: two warm starts with Vulkan of --cache, read-only,\n"
    "                  each in a process of its own: from the driver binaries kiln\n"
    "                  keeps per pipeline (VK_KHR_pipeline_binary) and from\n"
    "                  pipelines.vkc; time, peak memory, bytes on disk and where the\n"
    "                  pipelines came from. Prepare DIR twice first: kiln prepare,\n"
    "                  then kiln prepare --binaries on (a build that captures its\n"
    "                  binaries leaves the pipeline cache out)\n"
    "  --no-driver-cache  with --binaries: the drivers' own disk caches off\n"
    "  --isolate       with --binaries: both starts build in worker processes (kiln\n"
    "                  start --isolate), which make the pipelines from the binaries\n"
    "  --json          one JSON object on stdout\n"
    "  --help          this text\n"
    "\n"
    "Exit codes: 0 done, 1 a start failed, 2 bad usage.\n";

struct start_arg {
    const char *dir;
    uint64_t recent;
    unsigned jobs;
};

struct start_result {
    int rc;
    uint64_t records, loaded, bytes, total_ns, peak_rss;
};

static void start_child(void *arg, void *result)
{
    const struct start_arg *a = arg;
    struct start_result *r = result;
    memset(r, 0, sizeof(*r));
    bool reset = bench_child_reset_peak();
    struct kiln_start_options o = KILN_START_OPTIONS_INIT;
    o.cache_dir = a->dir;
    o.any_stamp = true;
    o.no_vulkan = true;
    o.jobs = a->jobs;
    o.recent = a->recent;
    struct kiln_start_summary s = KILN_START_SUMMARY_INIT;
    r->rc = kiln_warm_start(&o, NULL, NULL, &s);
    r->records = s.records;
    r->loaded = s.loaded;
    r->bytes = s.bytes;
    r->total_ns = s.total_ns;
    r->peak_rss = bench_child_peak_rss(reset);
}

struct bench_start {
    const char *name;
    struct start_arg subset, only, whole;
};

static double mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

static void json_run(struct cli_json *j, const char *key, const struct start_result *r)
{
    cli_json_object_begin(j, key);
    cli_json_u64(j, "records", r->records);
    cli_json_u64(j, "loaded", r->loaded);
    cli_json_u64(j, "bytes", r->bytes);
    cli_json_u64(j, "peak_rss_bytes", r->peak_rss);
    cli_json_object_end(j);
}

static void report(const struct bench_start *b, const struct start_result r[3], bool json)
{
    double ratio = r[1].peak_rss ? (double)r[0].peak_rss / (double)r[1].peak_rss : 0;
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_u64(&j, "recent", b->subset.recent);
        json_run(&j, "subset", &r[0]);
        json_run(&j, "only", &r[1]);
        json_run(&j, "whole", &r[2]);
        cli_json_double(&j, "subset_vs_only", ratio);
        struct cli_phase_time rows[3] = {
            {"subset", r[0].total_ns}, {"only", r[1].total_ns}, {"whole", r[2].total_ns}};
        cli_json_phase_seconds(&j, rows, 3);
        cli_json_end(&j);
        return;
    }
    static const char *const what[3] = {"subset", "only", "whole"};
    printf("%-8s %9s %9s %10s %12s\n", "start", "records", "loaded", "seconds", "peak MiB");
    for (int i = 0; i < 3; i++)
        printf("%-8s %9" PRIu64 " %9" PRIu64 " %10.3f %12.1f\n", what[i], r[i].records, r[i].loaded,
               (double)r[i].total_ns / 1e9, mib(r[i].peak_rss));
    printf("subset_vs_only %.3f (the subset's peak over a cache of only those programs)\n", ratio);
}

static int run_all(const struct bench_start *b, bool json)
{
    struct start_result r[3];
    const struct start_arg *args[3] = {&b->subset, &b->only, &b->whole};
    for (int i = 0; i < 3; i++) {
        if (bench_child_run(b->name, "a measuring process", start_child, (void *)args[i], &r[i],
                            sizeof(r[i])) != KILN_OK)
            return KILN_EXIT_FAILED;
        if (r[i].rc < 0) {
            cli_error(b->name, "%s: warm start failed: %s", args[i]->dir, kiln_strerror(r[i].rc));
            return KILN_EXIT_FAILED;
        }
    }
    report(b, r, json);
    return KILN_EXIT_OK;
}

/* ---- --binaries: the host tier against pipelines.vkc ----------------------- */

struct tier_arg {
    const char *dir;
    unsigned jobs;
    uint32_t binaries; /* enum kiln_binaries_mode */
    bool no_driver_cache;
    const struct kiln_isolate_options *isolate; /* NULL: threads */
};

struct tier_result {
    int rc;
    uint64_t built, failed, from_binaries, from_pipeline_cache, compiled, disk_bytes;
    uint64_t pipelines_ns, total_ns, peak_rss;
    bool binaries_used;
};

static void tier_child(void *arg, void *result)
{
    const struct tier_arg *a = arg;
    struct tier_result *r = result;
    memset(r, 0, sizeof(*r));
    if (a->no_driver_cache)
        bench_child_no_disk_cache();
    bool reset = bench_child_reset_peak();
    struct kiln_start_options o = KILN_START_OPTIONS_INIT;
    o.cache_dir = a->dir;
    o.any_stamp = true;
    o.read_only = true;
    o.jobs = a->jobs;
    o.binaries = a->binaries;
    o.isolate = a->isolate;
    struct kiln_start_summary s = KILN_START_SUMMARY_INIT;
    r->rc = kiln_warm_start(&o, NULL, NULL, &s);
    r->built = s.pipelines_built;
    r->failed = s.pipelines_failed;
    r->from_binaries = s.from_binaries;
    r->from_pipeline_cache = s.from_pipeline_cache;
    r->compiled = s.compiled;
    r->binaries_used = s.binaries_used;
    r->disk_bytes = a->binaries ? s.binaries_bytes : s.vk_cache_loaded_bytes;
    r->pipelines_ns = s.pipelines_ns;
    r->total_ns = s.total_ns;
    r->peak_rss = bench_child_peak_rss(reset);
}

static void json_tier(struct cli_json *j, const char *key, const struct tier_result *r)
{
    cli_json_object_begin(j, key);
    cli_json_u64(j, "pipelines_built", r->built);
    cli_json_u64(j, "pipelines_failed", r->failed);
    cli_json_u64(j, "from_binaries", r->from_binaries);
    cli_json_u64(j, "from_pipeline_cache", r->from_pipeline_cache);
    cli_json_u64(j, "compiled", r->compiled);
    cli_json_u64(j, "disk_bytes", r->disk_bytes);
    cli_json_u64(j, "peak_rss_bytes", r->peak_rss);
    cli_json_object_end(j);
}

static void report_tier(const struct tier_result r[2], bool isolate, bool json)
{
    double t = r[1].total_ns ? (double)r[0].total_ns / (double)r[1].total_ns : 0;
    double m = r[1].peak_rss ? (double)r[0].peak_rss / (double)r[1].peak_rss : 0;
    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_bool(&j, "binaries_used", r[0].binaries_used);
        cli_json_bool(&j, "isolate", isolate);
        json_tier(&j, "binaries", &r[0]);
        json_tier(&j, "pipeline_cache", &r[1]);
        cli_json_double(&j, "time_vs_pipeline_cache", t);
        cli_json_double(&j, "peak_vs_pipeline_cache", m);
        struct cli_phase_time rows[4] = {{"binaries", r[0].total_ns},
                                         {"binaries_pipelines", r[0].pipelines_ns},
                                         {"pipeline_cache", r[1].total_ns},
                                         {"pipeline_cache_pipelines", r[1].pipelines_ns}};
        cli_json_phase_seconds(&j, rows, 4);
        cli_json_end(&j);
        return;
    }
    static const char *const what[2] = {"binaries", "pipelines.vkc"};
    printf("%-14s %8s %9s %8s %9s %10s %10s %10s\n", "start", "built", "binaries", "cache",
           "compiled", "seconds", "peak MiB", "disk MiB");
    for (int i = 0; i < 2; i++)
        printf("%-14s %8" PRIu64 " %9" PRIu64 " %8" PRIu64 " %9" PRIu64 " %10.3f %10.1f %10.1f\n",
               what[i], r[i].built, r[i].from_binaries, r[i].from_pipeline_cache, r[i].compiled,
               (double)r[i].total_ns / 1e9, mib(r[i].peak_rss), mib(r[i].disk_bytes));
    if (!r[0].binaries_used)
        printf("binaries: not used (the device or kiln's headers lack VK_KHR_pipeline_binary)\n");
    printf("binaries vs pipelines.vkc%s: time %.3f, peak memory %.3f\n",
           isolate ? " (isolated workers; peak: kiln alone)" : "", t, m);
}

static int run_tier(const char *name, const struct tier_arg *a, bool json)
{
    struct tier_arg args[2] = {*a, *a};
    args[0].binaries = KILN_BINARIES_AUTO;
    args[1].binaries = KILN_BINARIES_OFF;
    struct tier_result r[2];
    for (int i = 0; i < 2; i++) {
        if (bench_child_run(name, "a measuring process", tier_child, &args[i], &r[i],
                            sizeof(r[i])) != KILN_OK)
            return KILN_EXIT_FAILED;
        if (r[i].rc < 0) {
            cli_error(name, "%s: warm start failed: %s", a->dir, kiln_strerror(r[i].rc));
            return KILN_EXIT_FAILED;
        }
    }
    report_tier(r, a->isolate != NULL, json);
    return KILN_EXIT_OK;
}

int cmd_bench_start(int argc, char **argv)
{
    const char *name = argv[0];
    static const struct option longopts[] = {
        {"recent", required_argument, NULL, 'N'},
        {"cache", required_argument, NULL, 'C'},
        {"only", required_argument, NULL, 'O'},
        {"jobs", required_argument, NULL, 'j'},
        {"json", no_argument, NULL, 'J'},
        {"binaries", no_argument, NULL, 'B'},
        {"no-driver-cache", no_argument, NULL, 'D'},
        {"isolate", no_argument, NULL, 'I'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct bench_start b = {.name = name};
    bool json = false, binaries = false, no_driver_cache = false, isolate = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = cli_getopt(argc, argv, ":", longopts)) != -1) {
        if (c == 'N')
            CLI_TRY(
                cli_parse_u64(name, "--recent", optarg, 1, UINT64_MAX, false, &b.subset.recent));
        else if (c == 'C')
            b.whole.dir = b.subset.dir = optarg;
        else if (c == 'O')
            b.only.dir = optarg;
        else if (c == 'j')
            CLI_TRY(cli_parse_jobs(name, optarg, &b.subset.jobs));
        else if (c == 'J')
            json = true;
        else if (c == 'B')
            binaries = true;
        else if (c == 'D')
            no_driver_cache = true;
        else if (c == 'I')
            isolate = true;
        else if (c == 'h')
            return printf(help, name, name), KILN_EXIT_OK;
        else
            return cli_option_error(name, c, argv);
    }
    if (optind < argc)
        return cli_usage_error(name, "unexpected argument '%s'", argv[optind]);
    if (binaries) {
        if (!b.subset.dir || b.subset.recent || b.only.dir)
            return cli_usage_error(name, "--binaries takes --cache DIR (not --recent, --only)");
        struct kiln_isolate_options iso = KILN_ISOLATE_OPTIONS_INIT;
        if (isolate && cli_isolate_worker(name, &iso) != 0)
            return KILN_EXIT_FAILED;
        struct tier_arg a = {.dir = b.subset.dir,
                             .jobs = b.subset.jobs,
                             .no_driver_cache = no_driver_cache,
                             .isolate = isolate ? &iso : NULL};
        return run_tier(name, &a, json);
    }
    if (no_driver_cache || isolate)
        return cli_usage_error(name, "--no-driver-cache and --isolate go with --binaries");
    if (!b.subset.recent || !b.subset.dir || !b.only.dir)
        return cli_usage_error(name, "--recent N, --cache DIR and --only DIR are all needed");
    b.only.jobs = b.whole.jobs = b.subset.jobs;
    return run_all(&b, json);
}

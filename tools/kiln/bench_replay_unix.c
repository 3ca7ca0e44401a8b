/*
 * bench_replay_unix.c - `kiln bench replay`: Fossilize archives replayed
 * through kiln_prepare and the Fossilize builder at each thread count, with
 * per-kind counts, builds per second and peak resident memory.
 *
 * Design. The archives are read once, in this process
 * (kiln_foz_pipelines_open): every graphics, compute and ray-tracing
 * pipeline of every archive, each key once, so a pipeline met again in
 * another archive is replayed once; each becomes a program of state kind
 * KILN_STATE_FOZ (the pipeline's closure as state, its modules' SPIR-V as
 * stages) when kiln_prepare loads it. Then each thread count runs in a
 * child process of its own (fork), which:
 *
 * - turns the drivers' disk caches off (MESA_SHADER_CACHE_DISABLE,
 *   __GL_SHADER_DISK_CACHE) and makes a Vulkan context whose
 *   VkPipelineCache lives in memory only and starts empty, so every
 *   pipeline is really compiled and no count finds another's work;
 * - resets its resident high-water mark (Linux: "5" written to
 *   /proc/self/clear_refs, then VmHWM read from /proc/self/status), so the
 *   peak is this count's own and not the parent's or an earlier count's;
 *   where that is not possible (another Unix) the peak is getrusage's, and
 *   peak_rss_method says so;
 * - runs kiln_prepare with `jobs` = the count and no memory budget over a
 *   fresh cache folder in this run's private temporary folder (so the
 *   build ledger there answers nothing), the set as its source
 *   (kiln_foz_pipelines_source) and the Fossilize builder
 *   (kiln_foz_kiln_builder_create) as the builder of kind KILN_STATE_FOZ,
 *   and reports through a pipe. With --memory-budget each count runs a
 *   second time, in a process of its own, under that budget.
 *
 * The rate is pipelines built over the pipelines phase's time
 * (kiln_prepare_summary.pipelines_ns); storing the programs first (the
 * translate phase: SPIR-V validated, packed and stored) is not part of it,
 * nor is the parent's Vulkan context: the threads' run is given the
 * context made above, and an isolated run lets kiln_prepare make its own
 * (its vulkan phase, as `kiln prepare --isolate`), beside which its early
 * workers make their devices (isolate.c); what of a worker's start the
 * phase still waits for (a device slower than the parent's, a worker
 * started late) is in the isolated rate.
 * Per kind, built and skipped are the Fossilize builder's own counts; every
 * other program of that kind failed somewhere (SPIR-V's validator refused
 * a module before storing, or the build failed). The speedup is each
 * count's rate over the rate at 1 thread.
 *
 * --generate N makes the archive first, in this process: the generator's
 * programs prepared without Vulkan into a cache in the private folder,
 * exported (kiln_foz_export) into the private folder or at --keep-archive,
 * and then read like any archive, so the generated set goes through the
 * same path as a recorded one and the file can be given to any replayer.
 * No Vulkan context exists before the fork, so no count inherits a driver.
 *
 * The children start as copies of this process (the archives in memory),
 * so their resident memory shares that baseline: start_rss_bytes gives it.
 * Windows has no fork and no resettable peak: the command says it is not
 * available there, as `kiln bench prepare` does.
 *
 * The temporary folder is made with mkdtemp and holds only what this run
 * wrote; it is removed at the end, also when a count failed.
 */
#include "bench_child.h"
#include "cli.h"
#include "cli_kinds.h"
#include "commands.h"

#include <assert.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#define NKINDS KILN_FOZ_KIND_COUNT

static const char help[] =
    "usage: %s [--threads LIST] [--memory-budget B[,B...]] [--budget-rule R] [--isolate]\n"
    "          [--device N] [--json]\n"
    "          ARCHIVE.foz...\n"
    "       %s --generate N [--seed S] [--keep-archive PATH] [--threads LIST] ... [--json]\n"
    "\n"
    "Replays every graphics, compute and ray-tracing pipeline of Fossilize\n"
    "archives through kiln_prepare and the Fossilize builder, once per thread\n"
    "count, each count in a process of its own with an empty pipeline cache\n"
    "(every pipeline compiled), and prints per kind built / skipped / failed,\n"
    "builds per second of the pipelines phase, the speedup over 1 thread and\n"
    "the count's peak resident memory. A pipeline found in several archives\n"
    "is replayed once.\n"
    "\n"
    "  --threads LIST  thread counts, comma-separated (default 1 and the\n"
    "                  usable CPUs)\n"
    "  --generate N    replay N programs of kiln's generator, written first as\n"
    "                  an archive (kiln_foz_export), so any replayer can time\n"
    "                  the same set\n"
    "  --seed S        the generator's seed (default: a new one per run)\n"
    "  --keep-archive PATH  keep the generated archive at PATH\n"
    "  --memory-budget B[,B...]  also run each count under each memory budget:\n"
    "                  B bytes (suffixes K, M, G; kiln_prepare_options.memory_budget)\n"
    "                  or N%% of the plain run's counted peak at that count (first,\n"
    "                  in the same run); prints each bounded rate, its ratio to\n"
    "                  plain, the peak and the budget used (peak / B); the plain\n"
    "                  runs have no budget. Up to 8, e.g. 25%%,50%%,75%%\n"
    "  --budget-rule R  how a budget admits builds: predicted (the default: each\n"
    "                  build's predicted memory) or largest-seen (kiln before 0.3:\n"
    "                  every build as large as the largest seen)\n"
    "  --isolate       also run each count with the builds in worker processes\n"
    "                  (kiln_prepare_options.isolate), beside the threads (with\n"
    "                  --memory-budget: isolated and bounded together)\n"
    "  --device N      the Vulkan device by index\n"
    "  --json          one JSON object on stdout\n"
    "  --help          this text\n";

/* The programs to replay: one per distinct pipeline of the archives. */
struct replay_set {
    struct kiln_foz_pipelines *fp; /* the archives' distinct pipelines */
    size_t n;                      /* how many */
    size_t archives;
    uint64_t met;           /* pipelines met in the archives */
    uint64_t duplicates;    /* met again (same key): replayed once */
    uint64_t unreadable;    /* left out: an object or module missing, or a bad record */
    uint64_t library_parts; /* stage-less library parts: built inside the pipelines linking them */
    uint64_t damaged;       /* damaged entries of any kind the reader skipped */
    uint64_t per_kind[NKINDS];
};

/* One --memory-budget entry: bytes, or a percentage of the plain peak. */
#define MAX_BUDGETS 8
struct budget_spec {
    uint64_t bytes;   /* 0: a percentage */
    unsigned percent; /* of the plain run's peak at the same count */
    char text[32];    /* as given */
};

struct bench {
    const char *name;
    bool use_device;
    unsigned device;
    uint64_t budget; /* the first --memory-budget's bytes (0: none, or a percentage) */
    struct budget_spec budgets[MAX_BUDGETS];
    unsigned nbudgets;
    bool largest_seen; /* --budget-rule largest-seen */
    bool isolate;      /* --isolate: the variant builds in worker processes */
    struct kiln_isolate_options iso;
    const struct replay_set *set;
    char tmp[CLI_PATH_MAX]; /* the private temporary folder */
};

/* The sampler's interval and timeline (see the sampler below). */
#define SAMPLE_MS       5
#define TIMELINE_POINTS 256

struct timeline {
    uint32_t n;      /* points kept */
    uint32_t stride; /* samples per kept point */
    uint32_t ms[TIMELINE_POINTS];
    uint64_t bytes[TIMELINE_POINTS];
};

/* What a child reports through its pipe. */
struct run_result {
    int rc;
    int step; /* enum kiln_prep_step */
    unsigned workers;
    uint64_t built[NKINDS], skipped[NKINDS];
    uint64_t built_total, skipped_total, failed_total; /* kiln's counts of kind FOZ */
    uint64_t not_stored;                               /* programs kiln_prepare could not store */
    uint64_t pipelines_ns;
    uint64_t driver_compiles; /* pipelines handed to the driver (the ledger answered none) */
    uint64_t budget;          /* the budget the pools kept to (0: none) */
    uint64_t start_rss, peak_rss;
    bool hwm_reset;        /* the peak was reset at the start (clear_refs) */
    bool kinds_known;      /* built[] and skipped[] were counted (not by isolated workers) */
    uint64_t own_peak_rss; /* this process alone (isolated: without its workers) */
    uint64_t counted_peak; /* the most the budget counted (PSS, sampled), 0: not sampled */
    uint64_t base;         /* what the budget counted before the first build (device, archive) */
    bool isolated;         /* built in worker processes: iso says what they did */
    struct cli_isolated iso;
    char device[256];
    char driver[256];
    char skip_reason[160];
    struct timeline timeline; /* resident memory over the run */
};

static const char *const kind_names[NKINDS] = {"graphics", "compute", "raytracing"};

/* ---- reading the archives ------------------------------------------------ */

/*
 * Reads the archives into the set (kiln_foz_pipelines_open: each pipeline
 * once, by key). @return 0, or the error (one line logged, naming the file).
 */
static int set_open(const char *const *paths, size_t n, struct replay_set *s)
{
    int rc = kiln_foz_pipelines_open(paths, n, &s->fp);
    if (rc < 0)
        return rc;
    s->n = kiln_foz_pipelines_count(s->fp);
    s->archives = kiln_foz_pipelines_archives(s->fp);
    struct kiln_foz_pipelines_stats st = KILN_FOZ_PIPELINES_STATS_INIT;
    kiln_foz_pipelines_get_stats(s->fp, SIZE_MAX, &st);
    for (int k = 0; k < NKINDS; k++) {
        s->met += st.found[k];
        s->duplicates += st.duplicates[k];
        s->unreadable += st.unreadable[k];
        s->library_parts += st.library_parts[k];
    }
    s->damaged = st.entries_skipped;
    for (size_t i = 0; i < s->n; i++) {
        enum kiln_foz_kind k = kiln_foz_kind_of(kiln_foz_pipelines_get(s->fp, i)->tag);
        if (k < KILN_FOZ_KIND_COUNT)
            s->per_kind[k]++;
    }
    return KILN_OK;
}

/* ---- the memory of kiln and its worker processes -------------------------- */

/*
 * A sampler thread reads, every SAMPLE_MS, the resident memory the pool's
 * budget counts (kiln_pool_resident_bytes: this process and every worker
 * registered with it, from /proc). It keeps the largest sum, which is the
 * peak of an isolated run (whose workers this process's VmHWM does not
 * hold; a peak shorter than the interval can be missed), and a timeline of
 * at most TIMELINE_POINTS samples for plots of memory against the budget:
 * when full, every other point is dropped and the stride doubles, so the
 * timeline always spans the whole run.
 */
struct sampler {
    pthread_t thread;
    atomic_bool stop;
    uint64_t peak;       /* written by the thread only, read after the join */
    struct timeline *tl; /* the same */
};

static void timeline_add(struct timeline *tl, uint64_t sample, uint32_t ms, uint64_t bytes)
{
    if (sample % tl->stride != 0)
        return;
    if (tl->n == TIMELINE_POINTS) {
        for (uint32_t i = 0; i < TIMELINE_POINTS / 2; i++) {
            tl->ms[i] = tl->ms[2 * i];
            tl->bytes[i] = tl->bytes[2 * i];
        }
        tl->n = TIMELINE_POINTS / 2;
        tl->stride *= 2;
        if (sample % tl->stride != 0)
            return;
    }
    tl->ms[tl->n] = ms;
    tl->bytes[tl->n] = bytes;
    tl->n++;
}

static void *sample_loop(void *arg)
{
    struct sampler *sm = arg;
    uint64_t t0 = kiln_now_ns();
    for (uint64_t i = 0; !atomic_load(&sm->stop); i++) {
        uint64_t v = kiln_pool_resident_bytes();
        sm->peak = v > sm->peak ? v : sm->peak;
        timeline_add(sm->tl, i, (uint32_t)((kiln_now_ns() - t0) / 1000000u), v);
        struct timespec ts = {0, SAMPLE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* ---- one thread count, in a child ---------------------------------------- */

static void child_run(const struct bench *b, unsigned threads, bool variant, uint64_t budget,
                      struct run_result *r)
{
    memset(r, 0, sizeof(*r));
    bench_child_no_disk_cache();
    r->hwm_reset = bench_child_reset_peak();
    r->start_rss = kiln_rss_bytes();

    /* A pipeline cache in memory only, empty: nothing compiled before; the
     * ray-tracing extensions only for a set with ray-tracing pipelines
     * (bench_child_vk). */
    bool rt = b->set->per_kind[KILN_FOZ_KIND_RAYTRACING] != 0;
    struct kiln_vk *vk = NULL;
    r->rc = bench_child_vk(b->use_device, b->device, rt, &vk);
    if (r->rc < 0) {
        r->step = KILN_PREP_STEP_VULKAN;
        return;
    }
    const struct kiln_vk_info *vi = kiln_vk_get_info(vk);
    snprintf(r->device, sizeof(r->device), "%s", vi->device_name);
    snprintf(r->driver, sizeof(r->driver), "%s", vi->driver_info);

    struct kiln_builder fb = KILN_BUILDER_INIT;
    r->rc = kiln_foz_kiln_builder_create(NULL, &fb);
    if (r->rc < 0) {
        r->step = KILN_PREP_STEP_OTHER;
        return;
    }
    struct kiln_program_source src;
    kiln_foz_pipelines_source(b->set->fp, &src);
    char dir[CLI_PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/cache-%ut%s", b->tmp, threads, variant ? "-variant" : "");
    struct kiln_prepare_options o = KILN_PREPARE_OPTIONS_INIT;
    kiln_prepare_options_init(&o);
    o.cache_dir = dir;
    o.source = &src;
    o.jobs = threads;
    o.builders = &fb;
    o.nbuilders = 1;
    /* The plain run has no budget; a variant the one asked for. */
    o.memory_budget = variant && budget ? budget : UINT64_MAX;
    o.largest_seen_budget = b->largest_seen;
    bool isolated = variant && b->isolate;
    if (isolated) {
        /* kiln_prepare makes its own context, as `kiln prepare --isolate`
         * does, and greets its early workers beside that device: the phase
         * leaves out the parent's context, as the threads' run does. */
        o.isolate = &b->iso;
        kiln_vk_destroy(vk);
    } else {
        o.vk = vk;
    }
    r->timeline.stride = 1;
    struct sampler sm = {.peak = 0, .tl = &r->timeline};
    atomic_init(&sm.stop, false);
    bool sampling = pthread_create(&sm.thread, NULL, sample_loop, &sm) == 0;
    struct kiln_prepare_summary s = KILN_PREPARE_SUMMARY_INIT;
    r->base = kiln_pool_resident_bytes();
    r->rc = kiln_prepare(&o, NULL, NULL, &s);
    if (sampling) {
        atomic_store(&sm.stop, true);
        pthread_join(sm.thread, NULL);
    }
    r->step = (int)s.step;
    r->workers = s.workers;
    r->not_stored = s.failed;
    r->pipelines_ns = s.pipelines_ns;
    r->driver_compiles = s.driver_compiles;
    r->budget = s.memory_budget;
    const struct kiln_kind_counts *k = &s.kinds[KILN_STATE_FOZ];
    r->built_total = k->built;
    r->skipped_total = k->skipped;
    r->failed_total = k->failed;
    snprintf(r->skip_reason, sizeof(r->skip_reason), "%s", k->skip_reason);
    /* Over the whole phase (the Fossilize builder itself ends with it).
     * Isolated workers build with builders of their own, which this
     * process cannot read: their split by kind is unknown here. */
    struct kiln_foz_builder_stats st = KILN_FOZ_BUILDER_STATS_INIT;
    kiln_foz_kiln_builder_stats(&fb, &st);
    r->kinds_known = !isolated;
    r->isolated = isolated;
    r->iso = CLI_ISOLATED(&s);
    for (int i = 0; i < NKINDS; i++) {
        r->built[i] = st.built[i];
        r->skipped[i] = st.skipped[i];
    }
    r->own_peak_rss = bench_child_peak_rss(r->hwm_reset);
    r->peak_rss = isolated && sampling && sm.peak > r->own_peak_rss ? sm.peak : r->own_peak_rss;
    r->counted_peak = sampling ? sm.peak : 0;
    /* Nothing else to free: the process ends here. */
}

struct measure_arg {
    const struct bench *b;
    unsigned threads;
    bool variant;
    uint64_t budget;
};

static void child_entry(void *arg, void *result)
{
    const struct measure_arg *a = arg;
    child_run(a->b, a->threads, a->variant, a->budget, result);
}

/* Runs one thread count in a child process and reads its result; a
 * variant runs under `budget` bytes (0: none). */
static int measure(const struct bench *b, unsigned threads, bool variant, uint64_t budget,
                   struct run_result *r)
{
    struct measure_arg a = {.b = b, .threads = threads, .variant = variant, .budget = budget};
    char what[64];
    snprintf(what, sizeof(what), "the process replaying on %u thread%s", threads,
             threads == 1 ? "" : "s");
    int rc = bench_child_run(b->name, what, child_entry, &a, r, sizeof(*r));
    if (rc < 0)
        return rc;
    if (r->rc < 0) {
        cli_error(b->name, "replaying on %u thread%s failed (%s step): %s", threads,
                  threads == 1 ? "" : "s", cli_prep_step_name((enum kiln_prep_step)r->step),
                  kiln_strerror(r->rc));
        cli_note_code(r->rc);
        return r->rc;
    }
    return KILN_OK;
}

/* ---- the report ------------------------------------------------------------ */

static double rate_of(const struct run_result *r)
{
    double s = (double)r->pipelines_ns / 1e9;
    return s > 0 ? (double)r->built_total / s : 0;
}

static uint64_t failed_of(const struct replay_set *set, const struct run_result *r, int k)
{
    assert(r->kinds_known);
    uint64_t done = r->built[k] + r->skipped[k];
    return set->per_kind[k] > done ? set->per_kind[k] - done : 0;
}

/* The runs of one kind (plain or the variant), one per thread count. */
struct series {
    const char *prefix; /* "" for the plain runs; "isolated_" or "bounded_" for the variant */
    const char *label;  /* the text table's: "plain", "isolated", "bounded", or the budget */
    const struct run_result *runs;
    const struct budget_spec *budget; /* the --memory-budget entry (NULL: none) */
};

/* @return the rate of the first run at 1 thread, or 0 when there is none. */
static double rate_at_one(const unsigned *list, unsigned nlist, const struct run_result *runs)
{
    for (unsigned i = 0; i < nlist; i++)
        if (list[i] == 1)
            return rate_of(&runs[i]);
    return 0;
}

/* "rss_timeline": {"ms": [...], "bytes": [...]}, the sampler's points. */
static void json_timeline(struct cli_json *j, const struct timeline *tl)
{
    cli_json_object_begin(j, "rss_timeline");
    cli_json_u64(j, "interval_ms", (uint64_t)SAMPLE_MS * tl->stride);
    cli_json_array_begin(j, "ms");
    for (uint32_t i = 0; i < tl->n; i++)
        cli_json_u64(j, NULL, tl->ms[i]);
    cli_json_array_end(j);
    cli_json_u64_array(j, "bytes", tl->bytes, tl->n);
    cli_json_object_end(j);
}

/* What a budget is held to: the most the budget counted (PSS where the
 * kernel has it, kiln and its workers, sampled every SAMPLE_MS), or the
 * peak resident memory where nothing was sampled. */
static uint64_t budget_peak(const struct run_result *r)
{
    return r->counted_peak ? r->counted_peak : r->peak_rss;
}

/* The used share of a run's budget (its budget_peak / budget); 0 without
 * one. */
static double budget_used(const struct run_result *r)
{
    return r->budget && r->budget != UINT64_MAX ? (double)budget_peak(r) / (double)r->budget : 0;
}

/* Whether a run's budget is above what was counted before its first build
 * (the Vulkan device, the archive read): a budget at or under that base
 * cannot be held by any admission rule, since the pools always let one
 * build run (kiln_prepare_options.memory_budget). */
static bool budget_reachable(const struct run_result *r)
{
    return r->budget > r->base;
}

static void json_run(struct cli_json *j, const struct replay_set *s, unsigned threads,
                     const struct run_result *r, uint64_t budget)
{
    cli_json_object_begin(j, NULL);
    cli_json_u64(j, "threads", threads);
    cli_json_u64(j, "workers", r->workers);
    cli_json_u64(j, "built", r->built_total);
    cli_json_u64(j, "skipped", r->skipped_total);
    cli_json_u64(j, "failed", s->n - r->built_total - r->skipped_total);
    cli_json_u64(j, "not_stored", r->not_stored);
    cli_json_u64(j, "build_failed", r->failed_total);
    cli_json_u64(j, "driver_compiles", r->driver_compiles);
    for (int k = 0; k < NKINDS; k++) {
        if (!r->kinds_known) {
            cli_json_null(j, kind_names[k]);
            continue;
        }
        cli_json_object_begin(j, kind_names[k]);
        cli_json_u64(j, "built", r->built[k]);
        cli_json_u64(j, "skipped", r->skipped[k]);
        cli_json_u64(j, "failed", failed_of(s, r, k));
        cli_json_object_end(j);
    }
    cli_json_str(j, "skip_reason", r->skip_reason);
    cli_json_double(j, "builds_per_s", rate_of(r));
    cli_json_u64(j, "start_rss_bytes", r->start_rss);
    cli_json_u64(j, "peak_rss_bytes", r->peak_rss);
    cli_json_u64(j, "own_peak_rss_bytes", r->own_peak_rss);
    if (r->budget != 0 && r->budget != UINT64_MAX)
        cli_json_u64(j, "memory_budget_bytes", r->budget);
    else
        cli_json_null(j, "memory_budget_bytes");
    cli_json_u64(j, "counted_peak_bytes", r->counted_peak);
    cli_json_u64(j, "base_bytes", r->base);
    cli_json_isolated(j, r->isolated ? &r->iso : NULL);
    if (budget) {
        cli_json_bool(j, "within_budget", budget_peak(r) <= budget);
        cli_json_bool(j, "reachable", budget_reachable(r));
        cli_json_double(j, "budget_used", budget_used(r));
    }
    json_timeline(j, &r->timeline);
    cli_json_object_end(j);
}

/* "budgets": one object per --memory-budget entry, each with an array per
 * measure, one value per thread count. */
static void json_budgets(struct cli_json *j, const unsigned *list, unsigned nlist,
                         const struct series *series, unsigned nseries)
{
    cli_json_array_begin(j, "budgets");
    for (unsigned v = 1; v < nseries; v++) {
        const struct series *se = &series[v];
        if (!se->budget)
            continue;
        cli_json_object_begin(j, NULL);
        cli_json_str(j, "spec", se->budget->text);
        cli_json_array_begin(j, "memory_budget_bytes");
        for (unsigned i = 0; i < nlist; i++)
            cli_json_u64(j, NULL, se->runs[i].budget);
        cli_json_array_end(j);
        cli_json_array_begin(j, "builds_per_s");
        for (unsigned i = 0; i < nlist; i++)
            cli_json_double(j, NULL, rate_of(&se->runs[i]));
        cli_json_array_end(j);
        cli_json_array_begin(j, "vs_plain");
        for (unsigned i = 0; i < nlist; i++) {
            double plain = rate_of(&series[0].runs[i]);
            if (plain > 0)
                cli_json_double(j, NULL, rate_of(&se->runs[i]) / plain);
            else
                cli_json_null(j, NULL);
        }
        cli_json_array_end(j);
        cli_json_array_begin(j, "peak_rss_bytes");
        for (unsigned i = 0; i < nlist; i++)
            cli_json_u64(j, NULL, se->runs[i].peak_rss);
        cli_json_array_end(j);
        cli_json_array_begin(j, "counted_peak_bytes");
        for (unsigned i = 0; i < nlist; i++)
            cli_json_u64(j, NULL, se->runs[i].counted_peak);
        cli_json_array_end(j);
        cli_json_array_begin(j, "budget_used");
        for (unsigned i = 0; i < nlist; i++)
            cli_json_double(j, NULL, budget_used(&se->runs[i]));
        cli_json_array_end(j);
        cli_json_array_begin(j, "within_budget");
        for (unsigned i = 0; i < nlist; i++)
            cli_json_bool(j, NULL, budget_peak(&se->runs[i]) <= se->runs[i].budget);
        cli_json_array_end(j);
        cli_json_array_begin(j, "reachable");
        for (unsigned i = 0; i < nlist; i++)
            cli_json_bool(j, NULL, budget_reachable(&se->runs[i]));
        cli_json_array_end(j);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
}

static void print_json(const struct bench *b, const unsigned *list, unsigned nlist,
                       const struct series *series, unsigned nseries, double read_secs,
                       const char *archive)
{
    const struct replay_set *s = b->set;
    const struct run_result *runs = series[0].runs;
    struct cli_json j;
    cli_json_begin(&j);
    cli_json_str(&j, "device", runs[0].device);
    cli_json_str(&j, "driver", runs[0].driver);
    if (archive)
        cli_json_str(&j, "archive", archive);
    else
        cli_json_null(&j, "archive");
    cli_json_u64(&j, "archives", s->archives);
    cli_json_u64(&j, "pipelines_met", s->met);
    cli_json_u64(&j, "duplicates", s->duplicates);
    cli_json_u64(&j, "unreadable", s->unreadable);
    cli_json_u64(&j, "library_parts", s->library_parts);
    cli_json_u64(&j, "pipelines", s->n);
    cli_json_object_begin(&j, "kinds");
    for (int k = 0; k < NKINDS; k++)
        cli_json_u64(&j, kind_names[k], s->per_kind[k]);
    cli_json_object_end(&j);
    cli_json_u64(&j, "damaged_entries", s->damaged);
    cli_json_str(&j, "peak_rss_method", runs[0].hwm_reset ? "clear_refs" : "getrusage");
    if (nseries > 1 && series[1].budget)
        cli_json_u64(&j, "memory_budget_bytes", series[1].runs[0].budget);
    else
        cli_json_null(&j, "memory_budget_bytes");
    cli_json_str(&j, "budget_rule", b->largest_seen ? "largest-seen" : "predicted");
    bench_json_threads(&j, list, nlist);
    /* The plain runs and the first variant under their old names. */
    for (unsigned v = 0; v < nseries && v < 2; v++) {
        const struct series *se = &series[v];
        char key[64];
        double rate1 = rate_at_one(list, nlist, se->runs);
        snprintf(key, sizeof(key), "%sbuilds_per_s", se->prefix);
        cli_json_array_begin(&j, key);
        for (unsigned i = 0; i < nlist; i++)
            cli_json_double(&j, NULL, rate_of(&se->runs[i]));
        cli_json_array_end(&j);
        /* Each count against 1 thread of the same kind of run. */
        snprintf(key, sizeof(key), "%sspeedup", se->prefix);
        cli_json_array_begin(&j, key);
        for (unsigned i = 0; i < nlist; i++)
            if (rate1 > 0)
                cli_json_double(&j, NULL, rate_of(&se->runs[i]) / rate1);
            else
                cli_json_null(&j, NULL);
        cli_json_array_end(&j);
        snprintf(key, sizeof(key), "%speak_rss_bytes", se->prefix);
        cli_json_array_begin(&j, key);
        for (unsigned i = 0; i < nlist; i++)
            cli_json_u64(&j, NULL, se->runs[i].peak_rss);
        cli_json_array_end(&j);
        /* Kiln and its workers where isolated: PSS, sampled (counted_peak). */
        snprintf(key, sizeof(key), "%scounted_peak_bytes", se->prefix);
        cli_json_array_begin(&j, key);
        for (unsigned i = 0; i < nlist; i++)
            cli_json_u64(&j, NULL, se->runs[i].counted_peak);
        cli_json_array_end(&j);
        snprintf(key, sizeof(key), "%sruns", se->prefix);
        cli_json_array_begin(&j, key);
        for (unsigned i = 0; i < nlist; i++)
            json_run(&j, s, list[i], &se->runs[i], v ? se->runs[i].budget : 0);
        cli_json_array_end(&j);
    }
    json_budgets(&j, list, nlist, series, nseries);
    if (nseries > 1) {
        /* The variant beside the plain run at the same count. */
        char key[64];
        snprintf(key, sizeof(key), "%svs_plain", series[1].prefix);
        cli_json_array_begin(&j, key);
        for (unsigned i = 0; i < nlist; i++) {
            double plain = rate_of(&runs[i]);
            if (plain > 0)
                cli_json_double(&j, NULL, rate_of(&series[1].runs[i]) / plain);
            else
                cli_json_null(&j, NULL);
        }
        cli_json_array_end(&j);
    }
    cli_json_object_begin(&j, "seconds");
    cli_json_double(&j, "read", read_secs);
    for (unsigned v = 0; v < nseries; v++)
        for (unsigned i = 0; i < nlist; i++) {
            char phase[64], nth[16] = "";
            size_t len = strlen(series[v].prefix);
            if (v > 1)
                snprintf(nth, sizeof(nth), "_%u", v);
            snprintf(phase, sizeof(phase), "pipelines_%ut%s%.*s%s", list[i], len ? "_" : "",
                     len ? (int)len - 1 : 0, series[v].prefix, nth);
            cli_json_double(&j, phase, (double)series[v].runs[i].pipelines_ns / 1e9);
        }
    cli_json_object_end(&j);
    cli_json_end(&j);
}

static void print_row(const struct replay_set *s, const char *label, unsigned threads,
                      const struct run_result *r, double rate1)
{
    char kinds[NKINDS][48];
    for (int k = 0; k < NKINDS; k++)
        if (r->kinds_known)
            snprintf(kinds[k], sizeof(kinds[k]), "%" PRIu64 "/%" PRIu64 "/%" PRIu64, r->built[k],
                     r->skipped[k], failed_of(s, r, k));
        else
            snprintf(kinds[k], sizeof(kinds[k]), "?");
    char speed[16] = "-";
    if (rate1 > 0)
        snprintf(speed, sizeof(speed), "%.2fx", rate_of(r) / rate1);
    printf("  %7u %-8s %10.1f %12.3f %8s %10.1f   %-14s %-14s %s\n", threads, label, rate_of(r),
           (double)r->pipelines_ns / 1e9, speed, (double)r->peak_rss / (1024.0 * 1024.0), kinds[0],
           kinds[1], kinds[2]);
}

/* Per budget and count: the bounded rate, its ratio to plain, the peak
 * and the budget used (peak / budget). */
static void print_budgets(const unsigned *list, unsigned nlist, const struct series *series,
                          unsigned nseries)
{
    printf("\n  %-10s %7s %10s %10s %10s %12s %10s %8s\n", "budget", "threads", "builds/s",
           "vs plain", "peak MiB", "counted MiB", "budget MiB", "used");
    bool within = true;
    unsigned unreachable = 0;
    uint64_t base = 0;
    for (unsigned v = 1; v < nseries; v++)
        for (unsigned i = 0; i < nlist; i++) {
            const struct run_result *r = &series[v].runs[i];
            double plain = rate_of(&series[0].runs[i]);
            bool reachable = budget_reachable(r);
            within = within && budget_peak(r) <= r->budget;
            if (!reachable) {
                unreachable++;
                base = r->base > base ? r->base : base;
            }
            printf("  %-10s %7u %10.1f %10.2f %10.1f %12.1f %10.1f %7.0f%%%s\n",
                   series[v].budget->text, list[i], rate_of(r), plain > 0 ? rate_of(r) / plain : 0,
                   (double)r->peak_rss / (1024.0 * 1024.0),
                   (double)budget_peak(r) / (1024.0 * 1024.0),
                   (double)r->budget / (1024.0 * 1024.0), 100.0 * budget_used(r),
                   reachable ? "" : " *");
        }
    printf("\n  bounded peaks %s their budgets (the counted peak: PSS where the kernel has it, "
           "kiln and its workers, sampled every %d ms; used = counted / budget)\n",
           within ? "all within" : "NOT all within", SAMPLE_MS);
    if (unreachable)
        printf("  * unreachable: at or under what was counted before the first build (up to "
               "%.1f MiB: the device, the archive); no budget there can be held\n",
               (double)base / (1024.0 * 1024.0));
}

/* Per count: the isolated run beside the threads': rates and their ratio,
 * the peaks (resident high-water mark; PSS of kiln and its workers,
 * sampled), and what the workers did. */
static void print_isolated(const unsigned *list, unsigned nlist, const struct series *series)
{
    printf("\n  %7s %11s %11s %7s %11s %11s %11s %11s %8s %8s %9s\n", "threads", "threads b/s",
           "isolated", "ratio", "thr. peak", "iso. peak", "thr. PSS", "iso. PSS", "workers",
           "batches", "limit ms");
    for (unsigned i = 0; i < nlist; i++) {
        const struct run_result *t = &series[0].runs[i], *r = &series[1].runs[i];
        double plain = rate_of(t);
        printf("  %7u %11.1f %11.1f %7.2f %11.1f %11.1f %11.1f %11.1f %8" PRIu64 " %8" PRIu64
               " %9" PRIu64 "\n",
               list[i], plain, rate_of(r), plain > 0 ? rate_of(r) / plain : 0,
               (double)t->peak_rss / (1024.0 * 1024.0), (double)r->peak_rss / (1024.0 * 1024.0),
               (double)t->counted_peak / (1024.0 * 1024.0),
               (double)r->counted_peak / (1024.0 * 1024.0), r->iso.workers, r->iso.batches,
               r->iso.time_limit_ms);
    }
    printf("\n  isolated: kiln and its worker processes (peaks in MiB: the resident high-water "
           "mark, and PSS sampled every %d ms); workers started for the work, batches sent, the "
           "learned time limit (0: none)\n",
           SAMPLE_MS);
}

static void print_text(const struct bench *b, const unsigned *list, unsigned nlist,
                       const struct series *series, unsigned nseries, double read_secs,
                       const char *archive)
{
    const struct replay_set *s = b->set;
    const struct run_result *runs = series[0].runs;
    printf("kiln bench replay: %zu pipeline%s (%" PRIu64 " graphics, %" PRIu64 " compute, %" PRIu64
           " ray tracing) from %zu archive%s on %s (%s)\n",
           s->n, CLI_S(s->n), s->per_kind[0], s->per_kind[1], s->per_kind[2], s->archives,
           s->archives == 1 ? "" : "s", runs[0].device, runs[0].driver);
    if (archive)
        printf("  the generated archive: %s\n", archive);
    printf("  %" PRIu64 " met, %" PRIu64 " duplicates replayed once, %" PRIu64
           " left out (unreadable), %" PRIu64
           " library parts without a stage (built inside their links); read in %.2f s\n",
           s->met, s->duplicates, s->unreadable, s->library_parts, read_secs);
    printf("  a fresh process and empty pipeline cache per run; peak memory per run (%s)\n",
           runs[0].hwm_reset ? "VmHWM reset by clear_refs" : "getrusage");
    if (nseries > 1)
        printf("  plain: threads, no memory budget; %s%s%s\n",
               b->nbudgets ? "each budget: --memory-budget (a % of the plain peak at that count), "
                             "the rule "
                           : "isolated",
               b->nbudgets ? (b->largest_seen ? "largest-seen" : "predicted") : "",
               b->isolate ? "; worker processes (--isolate; peak: kiln and its workers, sampled "
                            "every 5 ms)"
                          : "");
    printf("\n  %7s %-8s %10s %12s %8s %10s   %-14s %-14s %s\n", "threads", "run", "builds/s",
           "pipelines s", "speedup", "peak MiB", "graphics b/s/f", "compute b/s/f",
           "ray tr. b/s/f");
    double rate1[1 + MAX_BUDGETS] = {0};
    for (unsigned v = 0; v < nseries; v++)
        rate1[v] = rate_at_one(list, nlist, series[v].runs);
    for (unsigned i = 0; i < nlist; i++)
        for (unsigned v = 0; v < nseries; v++)
            print_row(s, series[v].label, list[i], &series[v].runs[i], rate1[v]);
    if (b->nbudgets)
        print_budgets(list, nlist, series, nseries);
    else if (b->isolate && nseries > 1)
        print_isolated(list, nlist, series);
    for (unsigned i = 0; i < nlist; i++)
        if (runs[i].skip_reason[0]) {
            printf("\n  first skip: %s\n", runs[i].skip_reason);
            break;
        }
    if (runs[0].not_stored)
        printf("  %" PRIu64 " program%s not stored (a module refused by SPIR-V's validator; "
               "logged above)\n",
               runs[0].not_stored, CLI_S(runs[0].not_stored));
}

/* Parses --memory-budget's list: B (bytes, suffixes K, M, G) or N% of the
 * plain peak (1 to 1000), comma-separated. @return 0, or prints one usage
 * line and returns KILN_EXIT_USAGE. */
static int parse_budgets(const char *name, const char *text, struct bench *b)
{
    b->nbudgets = 0;
    const char *p = text;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (b->nbudgets == MAX_BUDGETS || len == 0 || len >= sizeof(b->budgets[0].text))
            return cli_usage_error(name,
                                   "--memory-budget: %s: expected up to %d budgets, each B "
                                   "or N%%, comma-separated",
                                   text, MAX_BUDGETS);
        struct budget_spec *sp = &b->budgets[b->nbudgets++];
        memcpy(sp->text, p, len);
        sp->text[len] = '\0';
        uint64_t v;
        if (sp->text[len - 1] == '%') {
            sp->text[len - 1] = '\0';
            int bad = cli_parse_u64(name, "--memory-budget", sp->text, 1, 1000, false, &v);
            sp->text[len - 1] = '%';
            if (bad)
                return KILN_EXIT_USAGE;
            sp->percent = (unsigned)v;
        } else {
            if (cli_parse_u64(name, "--memory-budget", sp->text, 1, UINT64_MAX - 1, true, &v))
                return KILN_EXIT_USAGE;
            sp->bytes = v;
        }
        p = comma ? comma + 1 : p + len;
    }
    b->budget = b->nbudgets ? b->budgets[0].bytes : 0;
    return b->nbudgets ? 0 : cli_usage_error(name, "--memory-budget: expected B or N%%");
}

int cmd_bench_replay(int argc, char **argv)
{
    const char *name = argv[0];
    static const struct option longopts[] = {
        {"threads", required_argument, NULL, 't'},
        {"generate", required_argument, NULL, 'g'},
        {"seed", required_argument, NULL, 's'},
        {"keep-archive", required_argument, NULL, 'k'},
        {"memory-budget", required_argument, NULL, 'M'},
        {"budget-rule", required_argument, NULL, 'R'},
        {"isolate", no_argument, NULL, 'I'},
        {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct bench b = {.name = name};
    unsigned list[BENCH_MAX_RUNS];
    unsigned nlist = 0;
    uint32_t generate = 0;
    uint64_t seed = 0, v;
    const char *keep = NULL;
    bool json = false, seed_given = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = cli_getopt(argc, argv, ":", longopts)) != -1) {
        switch (c) {
        case 't':
            if (bench_parse_threads(name, optarg, list, &nlist))
                return KILN_EXIT_USAGE;
            break;
        case 'g':
            if (cli_parse_u64(name, "--generate", optarg, 1, 1000000, false, &v))
                return KILN_EXIT_USAGE;
            generate = (uint32_t)v;
            break;
        case 's':
            if (cli_parse_seed(name, optarg, &seed))
                return KILN_EXIT_USAGE;
            seed_given = true;
            break;
        case 'k':
            CLI_TRY(cli_check_path(name, "--keep-archive", optarg));
            keep = optarg;
            break;
        case 'd':
            if (cli_parse_device(name, optarg, &b.use_device, &b.device))
                return KILN_EXIT_USAGE;
            break;
        case 'M':
            if (parse_budgets(name, optarg, &b))
                return KILN_EXIT_USAGE;
            break;
        case 'R':
            if (strcmp(optarg, "predicted") != 0 && strcmp(optarg, "largest-seen") != 0)
                return cli_usage_error(name,
                                       "--budget-rule: %s: expected predicted or "
                                       "largest-seen",
                                       optarg);
            b.largest_seen = strcmp(optarg, "largest-seen") == 0;
            break;
        case 'I':
            b.isolate = true;
            break;
        case 'J':
            json = true;
            break;
        case 'h':
            printf(help, name, name);
            return KILN_EXIT_OK;
        default:
            return cli_option_error(name, c, argv);
        }
    }
    if (generate && optind < argc)
        return cli_usage_error(name, "--generate and archives exclude each other");
    if (!generate && optind >= argc)
        return cli_usage_error(name, "expected archives (ARCHIVE.foz...) or --generate N");
    if (!generate && (keep || seed_given))
        return cli_usage_error(name, "%s needs --generate", keep ? "--keep-archive" : "--seed");
    if (keep && kiln_cache_check_output(NULL, keep) == KILN_ECACHE_FILE) {
        cli_error(name, "--keep-archive: %s: in a kiln cache's folder: not written over", keep);
        return KILN_EXIT_USAGE;
    }
    if (b.isolate && cli_isolate_worker(name, &b.iso))
        return KILN_EXIT_FAILED;
    CLI_TRY(cli_apply_cache_affinity(name));
    if (nlist == 0) {
        struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
        kiln_pool_probe(NULL, NULL, &m);
        struct kiln_pool_limits none = KILN_POOL_LIMITS_INIT;
        struct kiln_pool_plan plan = KILN_POOL_PLAN_INIT;
        kiln_pool_policy(&m, &none, &plan);
        list[nlist++] = 1;
        if (plan.cpus > 1)
            list[nlist++] = plan.cpus;
    }
    if (generate && !seed_given && kiln_random_bytes(&seed, sizeof(seed)) < 0)
        seed = kiln_now_ns();

    if (bench_tmpdir(name, "bench-replay", b.tmp, sizeof(b.tmp)) < 0)
        return KILN_EXIT_FAILED;

    int ex = KILN_EXIT_OK;
    struct replay_set set = {0};
    b.set = &set;
    char archive[CLI_PATH_MAX + 32] = "";
    uint64_t t0 = kiln_now_ns();
    const char *const *paths = (const char *const *)argv + optind;
    size_t npaths = (size_t)(argc - optind);
    const char *gen_paths[1];
    if (generate) {
        int rc =
            bench_generated_archive(name, b.tmp, generate, seed, keep, archive, sizeof(archive));
        if (rc < 0)
            ex = cli_exit_for(rc) == KILN_EXIT_USAGE ? KILN_EXIT_USAGE : KILN_EXIT_FAILED;
        else if (!json)
            fprintf(stderr, "the generated archive: %s\n", archive);
        gen_paths[0] = archive;
        paths = gen_paths;
        npaths = 1;
    }
    if (ex == KILN_EXIT_OK) {
        int rc = set_open(paths, npaths, &set);
        if (rc < 0)
            ex = generate ? KILN_EXIT_FAILED : cli_exit_for(rc);
    }
    if (ex == KILN_EXIT_OK && set.n == 0) {
        cli_error(name, "no pipelines in the archives");
        ex = KILN_EXIT_USAGE;
    }
    double read_secs = cli_seconds(t0, kiln_now_ns());

    /* The plain runs, then one series per budget (or the isolated one). */
    struct run_result *all = calloc((size_t)(1 + MAX_BUDGETS) * BENCH_MAX_RUNS, sizeof(*all));
    struct series series[1 + MAX_BUDGETS];
    unsigned nseries = 1 + (b.nbudgets ? b.nbudgets : b.isolate ? 1u : 0u);
    for (unsigned k = 0; all && k < nseries; k++)
        series[k] = (struct series){.prefix = k == 0      ? ""
                                              : b.isolate ? "isolated_"
                                                          : "bounded_",
                                    .label = k == 0       ? "plain"
                                             : b.nbudgets ? b.budgets[k - 1].text
                                                          : "isolated",
                                    .runs = all + (size_t)k * BENCH_MAX_RUNS,
                                    .budget = k && b.nbudgets ? &b.budgets[k - 1] : NULL};
    if (!all && ex == KILN_EXIT_OK) {
        cli_error(name, "out of memory");
        ex = KILN_EXIT_FAILED;
    }
    for (unsigned i = 0; i < nlist && ex == KILN_EXIT_OK; i++)
        for (unsigned k = 0; k < nseries && ex == KILN_EXIT_OK; k++) {
            /* A percentage is of the plain run's peak at this count, run first. */
            const struct budget_spec *sp = series[k].budget;
            uint64_t budget = !sp         ? 0
                              : sp->bytes ? sp->bytes
                                          : budget_peak(&all[i]) / 100u * sp->percent;
            if (!json)
                fprintf(stderr, "replaying %zu pipelines on %u thread%s %s...\n", set.n, list[i],
                        list[i] == 1 ? "" : "s", k ? series[k].label : "");
            if (measure(&b, list[i], k > 0, budget, (struct run_result *)&series[k].runs[i]) < 0)
                ex = KILN_EXIT_FAILED;
        }
    if (ex == KILN_EXIT_OK) {
        const char *arch = generate ? archive : NULL;
        if (json)
            print_json(&b, list, nlist, series, nseries, read_secs, arch);
        else
            print_text(&b, list, nlist, series, nseries, read_secs, arch);
    }
    free(all);
    kiln_foz_pipelines_destroy(set.fp);
    if (bench_remove_tree(b.tmp) != 0) {
        cli_error(name, "%s: could not remove the temporary folder: %s", b.tmp, strerror(errno));
        if (ex == KILN_EXIT_OK)
            ex = KILN_EXIT_FAILED;
    }
    return ex;
}

/*
 * bench_prepare_unix.c - `kiln bench prepare`: pipeline builds per second at
 * each thread count, and the memory of kept shader modules against
 * modules made only for each create call, in one run.
 *
 * The programs are made once, before any Vulkan instance exists: N
 * generated programs are translated (kiln's GLSL translator at
 * KILN_GLSL_OPT_NONE) and packed (KILN_CODEC_KILN) on a pool. Then every
 * measurement runs in a child process of its own (fork), which makes its
 * own Vulkan context, builds all N pipelines, and reports through a pipe:
 *
 * - Rate runs: one per thread count (1, 2, 4, ... up to the usable CPUs,
 *   then twice the usable CPUs, or --threads), with no VkPipelineCache,
 *   so every build compiles; each pipeline is destroyed after its build.
 *   A fresh process and device per run means no run finds another run's
 *   work in the driver's memory, and the drivers' own disk caches are
 *   turned off in the children (MESA_SHADER_CACHE_DISABLE,
 *   __GL_SHADER_DISK_CACHE) so none finds it on disk either.
 *
 * - Memory runs: "keep" makes a VkShaderModule for every stage up front
 *   (kiln_vk_module_create), builds every pipeline from them and keeps the
 *   modules to the end, as a renderer without kiln does; "transient"
 *   builds every pipeline from the packed blobs (kiln_vk_stage_module: a
 *   module only for the create call, or none with VK_KHR_maintenance5).
 *   Both keep their pipelines alive, and both build on one thread, over
 *   the first --memory-programs programs:
 *   with one thread the allocator's state after the builds is the same in
 *   both modes but for the modules, so the difference is the modules' own
 *   cost and not the noise of sixteen threads' heap arenas. Resident memory
 *   is read after the last build (after malloc_trim in both, so it counts
 *   live memory, not the allocator's free lists) and the peak is the
 *   child's own high-water mark. A process's peak never goes down, hence
 *   one process per mode. "keep" also reports what the modules alone cost:
 *   the growth of resident memory from making them, before any build.
 *
 * Rate runs submit the largest programs first, so that the last builds to
 * start are short ones and no thread idles while one long build finishes.
 *
 * Each child starts as a copy of the parent (its packed programs), so the
 * children's figures share that baseline; the JSON gives it too
 * (baseline_rss_mb: the child's resident memory before Vulkan).
 */
#include "bench_child.h"
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#define DEFAULT_PROGRAMS        64u
#define DEFAULT_MEMORY_PROGRAMS 48u
#define DEFAULT_TWICE_PROGRAMS  16u

static const char help[] =
    "usage: %s [--generate N] [--threads LIST] [--seed S] [--json]\n"
    "\n"
    "Translates and packs N generated programs once, then builds all their\n"
    "pipelines (no VkPipelineCache: every build compiles) at each thread count,\n"
    "each run in its own process, and compares resident memory with every\n"
    "shader module kept alive against modules made only for each create call.\n"
    "\n"
    "  --generate N    programs to build (default %u; half compute, half\n"
    "                  vertex+fragment)\n"
    "  --threads LIST  thread counts, comma-separated (default 1,2,4,... up to\n"
    "                  the usable CPUs, then twice that)\n"
    "  --memory-programs M  programs of the two memory runs, built on one\n"
    "                  thread (default %u, at most N)\n"
    "  --twice-programs K  compile once: K generated programs prepared twice into\n"
    "                  a new cache folder (kiln_prepare, the policy's workers); the\n"
    "                  pipelines phase and driver compiles of each run side by side\n"
    "                  (default %u; 0 skips it)\n"
    "  --seed S        the generator's seed (default: a new random seed per run,\n"
    "                  so no driver cache from an earlier run can hold them)\n"
    "  --device N      the Vulkan device by index\n"
    "  --json          one JSON object on stdout\n"
    "  --help          this text\n";

struct bprog {
    char name[64];
    unsigned nstages;
    void *blob[KILN_PROGRAM_MAX_STAGES];
    size_t blob_size[KILN_PROGRAM_MAX_STAGES];
    size_t spirv_bytes;
    bool ok;
};

struct bench {
    const char *name;
    struct bprog *progs;
    unsigned n;
    uint64_t seed;
    bool use_device;
    unsigned device;
    uint64_t spirv_bytes;
    unsigned modules;
    unsigned *order;          /* program indexes, largest SPIR-V first */
    unsigned mem_n;           /* programs of the memory runs */
    uint64_t mem_spirv_bytes; /* their SPIR-V */
};

/* What a child reports through its pipe. */
struct child_result {
    int rc;
    uint64_t built;
    uint64_t failed;
    double seconds;
    double cpu_seconds; /* user + system CPU time of the whole process during the builds */
    uint64_t baseline_rss;
    uint64_t context_rss;
    uint64_t modules_rss; /* KEEP: after making every module, before any build */
    uint64_t after_rss;
    uint64_t peak_rss;
    int64_t peak_modules;
    bool chained;
    char device[256];
    char driver[256];
};

/* ---- making the programs --------------------------------------------------- */

struct make_job {
    const struct kiln_translator *t;
    struct bench *b;
    unsigned index;
};

static int make_one(void *arg, unsigned worker)
{
    (void)worker;
    struct make_job *j = arg;
    struct bprog *bp = &j->b->progs[j->index];
    struct kiln_program *p = NULL;
    int rc = kiln_generate_spirv(j->t, j->b->seed, j->index, &p);
    if (rc < 0)
        return rc;
    snprintf(bp->name, sizeof(bp->name), "%s", p->name);
    bp->nstages = p->nstages;
    bp->spirv_bytes = kiln_program_spirv_bytes(p);
    for (unsigned s = 0; s < p->nstages && rc == KILN_OK; s++)
        rc = kiln_pack(p->stages[s].words, p->stages[s].nwords, KILN_CODEC_KILN, NULL, &bp->blob[s],
                       &bp->blob_size[s]);
    kiln_program_destroy(p);
    bp->ok = rc == KILN_OK;
    return rc;
}

static const struct bench *sort_b;

static int larger_first(const void *x, const void *y)
{
    size_t a = sort_b->progs[*(const unsigned *)x].spirv_bytes;
    size_t c = sort_b->progs[*(const unsigned *)y].spirv_bytes;
    return a < c ? 1 : a > c ? -1 : 0;
}

static int make_programs(struct bench *b, unsigned workers)
{
    struct kiln_glsl *g;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc < 0) {
        cli_error(b->name, "no GLSL translator: %s", kiln_strerror(rc));
        return rc;
    }
    struct make_job *jobs = calloc(b->n, sizeof(*jobs));
    b->progs = calloc(b->n, sizeof(*b->progs));
    struct kiln_pool *pool = NULL;
    if (!jobs || !b->progs)
        rc = KILN_ENOMEM;
    if (rc == KILN_OK)
        rc = kiln_pool_create(workers, 0, &pool);
    struct cli_progress prog;
    cli_progress_start(&prog, "translate", b->n, false);
    for (unsigned i = 0; i < b->n && rc == KILN_OK; i++) {
        jobs[i] = (struct make_job){.t = kiln_glsl_translator(g), .b = b, .index = i};
        rc = kiln_pool_submit(pool, make_one, &jobs[i]);
    }
    if (pool) {
        while (kiln_pool_wait_for(pool, 200000000ull) > 0) {
            struct kiln_pool_progress pp = KILN_POOL_PROGRESS_INIT;
            kiln_pool_get_progress(pool, &pp);
            cli_progress_update(&prog, pp.done);
        }
        struct kiln_pool_progress pp = KILN_POOL_PROGRESS_INIT;
        kiln_pool_get_progress(pool, &pp);
        cli_progress_finish(&prog, pp.done);
        if (rc == KILN_OK && pp.failed)
            rc = KILN_ETRANSLATE;
    }
    kiln_pool_destroy(pool);
    free(jobs);
    kiln_glsl_destroy(g);
    if (rc < 0) {
        cli_error(b->name, "making the programs failed: %s", kiln_strerror(rc));
        return rc;
    }
    for (unsigned i = 0; i < b->n; i++) {
        b->spirv_bytes += b->progs[i].spirv_bytes;
        b->modules += b->progs[i].nstages;
        if (i < b->mem_n)
            b->mem_spirv_bytes += b->progs[i].spirv_bytes;
    }
    b->order = malloc(b->n * sizeof(*b->order));
    if (!b->order)
        return KILN_ENOMEM;
    for (unsigned i = 0; i < b->n; i++)
        b->order[i] = i;
    sort_b = b;
    qsort(b->order, b->n, sizeof(*b->order), larger_first);
    return KILN_OK;
}

static void free_programs(struct bench *b)
{
    for (unsigned i = 0; b->progs && i < b->n; i++)
        for (unsigned s = 0; s < b->progs[i].nstages; s++)
            kiln_pack_free(b->progs[i].blob[s]);
    free(b->progs);
    free(b->order);
    b->progs = NULL;
    b->order = NULL;
}

/* ---- the children ---------------------------------------------------------- */

enum child_mode { MODE_RATE, MODE_KEEP, MODE_TRANSIENT };

struct build_ctx {
    struct kiln_vk *vk;
    const struct bench *b;
    struct kiln_vk_module **modules; /* KEEP: two per program */
    struct kiln_vk_pipeline **pipes; /* KEEP / TRANSIENT: kept to the end */
};

struct build_arg {
    struct build_ctx *ctx;
    unsigned index;
};

static int build_job(void *arg, unsigned worker)
{
    (void)worker;
    struct build_arg *a = arg;
    const struct bprog *p = &a->ctx->b->progs[a->index];
    struct kiln_vk_module **mods =
        a->ctx->modules ? &a->ctx->modules[a->index * KILN_PROGRAM_MAX_STAGES] : NULL;
    struct kiln_vk_stage st[KILN_PROGRAM_MAX_STAGES];
    for (unsigned s = 0; s < p->nstages; s++)
        st[s] = (struct kiln_vk_stage){.size = sizeof(struct kiln_vk_stage),
                                       .blob = p->blob[s],
                                       .blob_size = p->blob_size[s],
                                       .module = mods ? mods[s] : NULL};
    struct kiln_vk_pipeline *pipe = NULL;
    int rc;
    if (p->nstages == 1) {
        rc = kiln_vk_compute_pipeline(a->ctx->vk, p->name, &st[0], &pipe);
    } else {
        struct kiln_vk_graphics g = {.size = sizeof(g), .vertex = &st[0], .fragment = &st[1]};
        rc = kiln_vk_graphics_pipeline(a->ctx->vk, p->name, &g, &pipe);
    }
    if (rc < 0)
        return rc;
    if (a->ctx->pipes)
        a->ctx->pipes[a->index] = pipe;
    else
        kiln_vk_pipeline_destroy(a->ctx->vk, pipe);
    return KILN_OK;
}

static void trim_heap(void)
{
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

/* CPU time this process used so far, every thread (the driver's own too). */
static double process_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Runs in the child: one measurement. */
static void child_run(const struct bench *b, enum child_mode mode, unsigned threads,
                      struct child_result *r)
{
    memset(r, 0, sizeof(*r));
    bench_child_no_disk_cache();
    trim_heap();
    r->baseline_rss = kiln_rss_bytes();

    struct kiln_vk_options vo = {.size = sizeof(vo),
                                 .no_pipeline_cache = true,
                                 .use_device_index = b->use_device,
                                 .device = b->device};
    struct kiln_vk *vk = NULL;
    r->rc = kiln_vk_create(&vo, &vk);
    if (r->rc < 0)
        return;
    const struct kiln_vk_info *vi = kiln_vk_get_info(vk);
    snprintf(r->device, sizeof(r->device), "%s", vi->device_name);
    snprintf(r->driver, sizeof(r->driver), "%s", vi->driver_info);
    r->chained = vi->chained_stages;
    trim_heap();
    r->context_rss = kiln_rss_bytes();

    struct build_ctx ctx = {.vk = vk, .b = b};
    struct build_arg *args = calloc(b->n, sizeof(*args));
    if (mode != MODE_RATE)
        ctx.pipes = calloc(b->n, sizeof(*ctx.pipes));
    if (mode == MODE_KEEP)
        ctx.modules = calloc((size_t)b->n * KILN_PROGRAM_MAX_STAGES, sizeof(*ctx.modules));
    if (!args || (mode != MODE_RATE && !ctx.pipes) || (mode == MODE_KEEP && !ctx.modules)) {
        r->rc = KILN_ENOMEM;
        goto out;
    }
    kiln_vk_reset_peak(vk);
    unsigned count = mode == MODE_RATE ? b->n : b->mem_n;
    if (mode == MODE_KEEP) {
        /* The old way: every module exists before the first pipeline. */
        for (unsigned i = 0; i < count && r->rc == KILN_OK; i++)
            for (unsigned s = 0; s < b->progs[i].nstages && r->rc == KILN_OK; s++) {
                struct kiln_vk_stage st = {.size = sizeof(st),
                                           .blob = b->progs[i].blob[s],
                                           .blob_size = b->progs[i].blob_size[s]};
                r->rc = kiln_vk_module_create(vk, b->progs[i].name, &st,
                                              &ctx.modules[i * KILN_PROGRAM_MAX_STAGES + s]);
            }
        if (r->rc < 0)
            goto out;
        trim_heap();
        r->modules_rss = kiln_rss_bytes();
    }

    struct kiln_pool *pool;
    r->rc = kiln_pool_create(threads, 0, &pool);
    if (r->rc < 0)
        goto out;
    uint64_t t0 = kiln_now_ns();
    double cpu0 = process_cpu_seconds();
    for (unsigned i = 0; i < count && r->rc == KILN_OK; i++) {
        /* Rate runs take the largest first; memory runs the first count. */
        args[i] = (struct build_arg){.ctx = &ctx, .index = mode == MODE_RATE ? b->order[i] : i};
        r->rc = kiln_pool_submit(pool, build_job, &args[i]);
    }
    kiln_pool_wait(pool);
    r->seconds = cli_seconds(t0, kiln_now_ns());
    r->cpu_seconds = process_cpu_seconds() - cpu0;
    struct kiln_pool_progress pp = KILN_POOL_PROGRESS_INIT;
    kiln_pool_get_progress(pool, &pp);
    kiln_pool_destroy(pool);
    r->built = pp.done - pp.failed;
    r->failed = pp.failed;

    trim_heap();
    r->after_rss = kiln_rss_bytes();
    r->peak_rss = kiln_peak_rss_bytes();
    struct kiln_vk_stats vs = KILN_VK_STATS_INIT;
    kiln_vk_get_stats(vk, &vs);
    r->peak_modules = vs.peak_modules;

out:
    /* Nothing to free carefully: the process ends here. */
    (void)ctx;
    free(args);
}

struct measure_arg {
    const struct bench *b;
    enum child_mode mode;
    unsigned threads;
};

static void child_entry(void *arg, void *result)
{
    const struct measure_arg *a = arg;
    child_run(a->b, a->mode, a->threads, result);
}

/* Runs one measurement in a child process and reads its result. */
static int measure(const struct bench *b, enum child_mode mode, unsigned threads,
                   struct child_result *r)
{
    struct measure_arg a = {.b = b, .mode = mode, .threads = threads};
    int rc = bench_child_run(b->name, "a measuring process", child_entry, &a, r, sizeof(*r));
    if (rc < 0)
        return rc;
    if (r->rc < 0) {
        cli_error(b->name, "measuring failed: %s", kiln_strerror(r->rc));
        return r->rc;
    }
    return KILN_OK;
}

static double mb(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

int cmd_bench_prepare(int argc, char **argv)
{
    const char *name = argv[0];
    static const struct option longopts[] = {
        {"generate", required_argument, NULL, 'n'},
        {"programs", required_argument, NULL, 'P'}, /* the old spelling */
        {"threads", required_argument, NULL, 't'},
        {"memory-programs", required_argument, NULL, 'm'},
        {"twice-programs", required_argument, NULL, 'T'},
        {"seed", required_argument, NULL, 's'},
        {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct bench b = {.name = name, .n = DEFAULT_PROGRAMS};
    unsigned list[BENCH_MAX_RUNS];
    unsigned nlist = 0, mem_n = DEFAULT_MEMORY_PROGRAMS, twice_n = DEFAULT_TWICE_PROGRAMS;
    bool json = false, seed_given = false;
    uint64_t v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = cli_getopt(argc, argv, ":", longopts)) != -1) {
        switch (c) {
        case 'P':
            cli_deprecated(name, "--programs", "--generate");
            /* fall through */
        case 'n':
            if (cli_parse_u64(name, "--generate", optarg, 1, 1000000, false, &v))
                return KILN_EXIT_USAGE;
            b.n = (unsigned)v;
            break;
        case 'm':
            if (cli_parse_u64(name, "--memory-programs", optarg, 1, 1000000, false, &v))
                return KILN_EXIT_USAGE;
            mem_n = (unsigned)v;
            break;
        case 'T':
            if (cli_parse_u64(name, "--twice-programs", optarg, 0, 1000000, false, &v))
                return KILN_EXIT_USAGE;
            twice_n = (unsigned)v;
            break;
        case 't':
            if (bench_parse_threads(name, optarg, list, &nlist))
                return KILN_EXIT_USAGE;
            break;
        case 's':
            if (cli_parse_seed(name, optarg, &b.seed))
                return KILN_EXIT_USAGE;
            seed_given = true;
            break;
        case 'd':
            if (cli_parse_device(name, optarg, &b.use_device, &b.device))
                return KILN_EXIT_USAGE;
            break;
        case 'J':
            json = true;
            break;
        case 'h':
            printf(help, name, DEFAULT_PROGRAMS, DEFAULT_MEMORY_PROGRAMS, DEFAULT_TWICE_PROGRAMS);
            return KILN_EXIT_OK;
        default:
            return cli_option_error(name, c, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error(name, "unexpected argument '%s'", argv[optind]);
    b.mem_n = mem_n < b.n ? mem_n : b.n;
    int rc = cli_apply_cache_affinity(name);
    if (rc)
        return rc;
    if (!seed_given && kiln_random_bytes(&b.seed, sizeof(b.seed)) < 0)
        b.seed = kiln_now_ns();

    /* The machine: usable CPUs and the policy's count. */
    struct kiln_pool_machine m = KILN_POOL_MACHINE_INIT;
    kiln_pool_probe(NULL, NULL, &m);
    struct kiln_pool_limits none = KILN_POOL_LIMITS_INIT;
    struct kiln_pool_plan cpu_plan = KILN_POOL_PLAN_INIT;
    kiln_pool_policy(&m, &none, &cpu_plan);
    unsigned cpus = cpu_plan.cpus;
    struct kiln_pool_plan policy_plan = KILN_POOL_PLAN_INIT;
    unsigned policy = kiln_pool_auto_workers(KILN_POOL_WORK_BUILD, 0, &policy_plan);
    const char *reason = policy_plan.reason;
    if (nlist == 0) {
        for (unsigned t = 1; t < cpus && nlist < BENCH_MAX_RUNS - 2; t *= 2)
            list[nlist++] = t;
        list[nlist++] = cpus;
        list[nlist++] = cpus * 2;
    }

    rc = make_programs(&b, policy);
    if (rc < 0) {
        free_programs(&b);
        return KILN_EXIT_FAILED;
    }

    struct child_result runs[BENCH_MAX_RUNS];
    double rates[BENCH_MAX_RUNS];
    double rate1 = 0, rate_cpus = 0, policy_rate = 0;
    bool have1 = false, have_cpus = false, have_policy = false;
    uint64_t failed = 0;
    for (unsigned i = 0; i < nlist && rc == KILN_OK; i++) {
        if (!json)
            fprintf(stderr, "building %u pipelines on %u thread%s...\n", b.n, list[i],
                    list[i] == 1 ? "" : "s");
        rc = measure(&b, MODE_RATE, list[i], &runs[i]);
        if (rc < 0)
            break;
        rates[i] = runs[i].seconds > 0 ? (double)runs[i].built / runs[i].seconds : 0;
        failed += runs[i].failed;
        if (list[i] == 1) {
            rate1 = rates[i];
            have1 = true;
        }
        if (list[i] == cpus) {
            rate_cpus = rates[i];
            have_cpus = true;
        }
        if (list[i] == policy) {
            policy_rate = rates[i];
            have_policy = true;
        }
    }
    struct child_result pol = {0}, keep = {0}, trans = {0};
    if (rc == KILN_OK && !have_policy) {
        if (!json)
            fprintf(stderr, "building %u pipelines on the policy's %u threads...\n", b.n, policy);
        rc = measure(&b, MODE_RATE, policy, &pol);
        if (rc == KILN_OK) {
            policy_rate = pol.seconds > 0 ? (double)pol.built / pol.seconds : 0;
            failed += pol.failed;
        }
    }
    if (rc == KILN_OK) {
        if (!json)
            fprintf(stderr, "memory: every module kept...\n");
        rc = measure(&b, MODE_KEEP, 1, &keep);
    }
    if (rc == KILN_OK) {
        if (!json)
            fprintf(stderr, "memory: modules only for the create call...\n");
        rc = measure(&b, MODE_TRANSIENT, 1, &trans);
    }
    struct bench_twice tw = {0};
    if (rc == KILN_OK && twice_n) {
        if (!json)
            fprintf(stderr, "compile once: %u programs prepared twice...\n", twice_n);
        rc = bench_prepare_twice(name, twice_n, b.seed, 0, &tw);
    }
    if (rc < 0) {
        free_programs(&b);
        return KILN_EXIT_FAILED;
    }
    failed += keep.failed + trans.failed + tw.failed[0] + tw.failed[1];
    double twice_ratio = tw.pipelines_s[0] > 0 ? tw.pipelines_s[1] / tw.pipelines_s[0] : 0;

    double best = 0;
    for (unsigned i = 0; i < nlist; i++)
        best = rates[i] > best ? rates[i] : best;
    best = policy_rate > best ? policy_rate : best;
    bool have_eff = have1 && have_cpus && rate1 > 0;
    double efficiency = have_eff ? rate_cpus / ((double)cpus * rate1) : 0;
    double keep_rss = mb(keep.after_rss), trans_rss = mb(trans.after_rss);
    double saved = keep_rss - trans_rss;
    double spirv = mb(b.spirv_bytes), mem_spirv = mb(b.mem_spirv_bytes);
    double modules_cost = mb(keep.modules_rss) - mb(keep.context_rss);
    const struct child_result *any = &runs[0];

    if (json) {
        struct cli_json j;
        cli_json_begin(&j);
        cli_json_str(&j, "device", any->device);
        cli_json_str(&j, "driver", any->driver);
        cli_json_u64(&j, "programs", b.n);
        cli_json_u64(&j, "modules", b.modules);
        cli_json_u64(&j, "seed", b.seed);
        cli_json_double(&j, "spirv_mb", spirv);
        cli_json_u64(&j, "cpus", cpus);
        bench_json_threads(&j, list, nlist);
        cli_json_array_begin(&j, "builds_per_s");
        for (unsigned i = 0; i < nlist; i++)
            cli_json_double(&j, NULL, rates[i]);
        cli_json_array_end(&j);
        /* One phase a run: "build_4t" is the build with 4 threads. */
        cli_json_object_begin(&j, "seconds");
        for (unsigned i = 0; i < nlist; i++) {
            char phase[32];
            snprintf(phase, sizeof(phase), "build_%ut", list[i]);
            cli_json_double(&j, phase, runs[i].seconds);
        }
        cli_json_object_end(&j);
        /* CPUs kept busy during each run: above the thread count when the
         * driver compiles on threads of its own. */
        cli_json_array_begin(&j, "cpus_busy");
        for (unsigned i = 0; i < nlist; i++)
            cli_json_double(&j, NULL,
                            runs[i].seconds > 0 ? runs[i].cpu_seconds / runs[i].seconds : 0);
        cli_json_array_end(&j);
        cli_json_u64(&j, "policy_threads", policy);
        cli_json_str(&j, "policy_reason", reason);
        cli_json_double(&j, "policy_builds_per_s", policy_rate);
        cli_json_double(&j, "policy_vs_best", best > 0 ? policy_rate / best : 0);
        if (have_eff)
            cli_json_double(&j, "efficiency", efficiency);
        else
            cli_json_null(&j, "efficiency");
        cli_json_u64(&j, "failed_builds", failed);
        cli_json_bool(&j, "transient_chained", trans.chained);
        cli_json_double(&j, "baseline_rss_mb", mb(trans.baseline_rss));
        cli_json_double(&j, "keep_modules_context_rss_mb", mb(keep.context_rss));
        cli_json_double(&j, "transient_modules_context_rss_mb", mb(trans.context_rss));
        cli_json_double(&j, "keep_modules_rss_mb", keep_rss);
        cli_json_double(&j, "transient_modules_rss_mb", trans_rss);
        cli_json_double(&j, "keep_modules_peak_mb", mb(keep.peak_rss));
        cli_json_double(&j, "transient_modules_peak_mb", mb(trans.peak_rss));
        cli_json_u64(&j, "keep_modules_peak_live", (uint64_t)keep.peak_modules);
        cli_json_u64(&j, "transient_modules_peak_live", (uint64_t)trans.peak_modules);
        cli_json_u64(&j, "memory_programs", b.mem_n);
        cli_json_double(&j, "memory_spirv_mb", mem_spirv);
        cli_json_double(&j, "keep_modules_cost_mb", modules_cost);
        cli_json_double(&j, "rss_saved_mb", saved);
        cli_json_bool(&j, "saved_at_least_spirv", saved >= mem_spirv);
        if (twice_n) {
            cli_json_object_begin(&j, "compile_once");
            cli_json_u64(&j, "programs", tw.programs);
            cli_json_u64(&j, "first_driver_compiles", tw.driver_compiles[0]);
            cli_json_u64(&j, "second_driver_compiles", tw.driver_compiles[1]);
            cli_json_u64(&j, "second_ledger_skipped", tw.ledger_skipped[1]);
            cli_json_object_begin(&j, "seconds");
            cli_json_double(&j, "first_pipelines", tw.pipelines_s[0]);
            cli_json_double(&j, "second_pipelines", tw.pipelines_s[1]);
            cli_json_double(&j, "first_total", tw.total_s[0]);
            cli_json_double(&j, "second_total", tw.total_s[1]);
            cli_json_object_end(&j);
            cli_json_double(&j, "pipelines_ratio", twice_ratio);
            cli_json_object_end(&j);
        } else {
            cli_json_null(&j, "compile_once");
        }
        cli_json_end(&j);
    } else {
        printf("kiln bench prepare: %u program%s (%u modules, %.1f MiB SPIR-V, seed 0x%" PRIx64
               ") on %s (%s)\n",
               b.n, CLI_S(b.n), b.modules, spirv, b.seed, any->device, any->driver);
        printf("  no VkPipelineCache, a fresh process and device per run\n\n");
        printf("  %8s %12s %10s %10s\n", "threads", "builds/s", "seconds", "CPUs busy");
        for (unsigned i = 0; i < nlist; i++)
            printf("  %8u %12.2f %10.2f %10.2f%s\n", list[i], rates[i], runs[i].seconds,
                   runs[i].seconds > 0 ? runs[i].cpu_seconds / runs[i].seconds : 0.0,
                   list[i] == cpus ? "   (usable CPUs)" : "");
        printf("\n  policy     %u thread%s, %.2f builds/s (%.0f%% of the best): %s\n", policy,
               CLI_S(policy), policy_rate, best > 0 ? 100.0 * policy_rate / best : 0.0, reason);
        if (have_eff)
            printf("  efficiency %.2f at %u CPUs (rate / (CPUs x rate at 1 thread))\n", efficiency,
                   cpus);
        printf("\n  memory (resident after building the first %u programs' pipelines on one thread;"
               " peak)\n",
               b.mem_n);
        printf("  %-30s %10.1f MiB  peak %8.1f MiB  (%" PRId64 " modules alive at most)\n",
               "every module kept", keep_rss, mb(keep.peak_rss), keep.peak_modules);
        printf("  %-30s %10.1f MiB  peak %8.1f MiB  (%" PRId64 " modules alive at most%s)\n",
               "modules only for the call", trans_rss, mb(trans.peak_rss), trans.peak_modules,
               trans.chained ? ", create info chained" : "");
        printf("  %-30s %10.1f MiB  (their SPIR-V: %.1f MiB; making the kept modules cost %.1f "
               "MiB)\n",
               "saved", saved, mem_spirv, modules_cost);
        if (twice_n) {
            printf("\n  compile once: %u programs prepared twice into one new cache folder\n",
                   tw.programs);
            printf("  %-8s %18s %16s %12s\n", "run", "pipelines phase s", "driver compiles",
                   "total s");
            printf("  %-8s %18.3f %16" PRIu64 " %12.2f\n", "first", tw.pipelines_s[0],
                   tw.driver_compiles[0], tw.total_s[0]);
            printf("  %-8s %18.3f %16" PRIu64 " %12.2f  (%" PRIu64 " answered by the ledger)\n",
                   "second", tw.pipelines_s[1], tw.driver_compiles[1], tw.total_s[1],
                   tw.ledger_skipped[1]);
            printf("  second / first pipelines phase: %.4f (%.2f%%)\n", twice_ratio,
                   100.0 * twice_ratio);
        }
        if (failed)
            printf("\n  %" PRIu64 " build%s failed (logged above)\n", failed, CLI_S(failed));
    }
    free_programs(&b);
    return failed ? KILN_EXIT_FAILED : KILN_EXIT_OK;
}

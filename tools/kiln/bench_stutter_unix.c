/*
 * bench_stutter_unix.c - `kiln bench stutter`: a frame loop replayed in every
 * mode of getting pipelines during play, side by side (issue 26).
 *
 * Design. The programs are made once, in this process, before any Vulkan
 * instance exists: the distinct pipelines of Fossilize archives (in
 * archive order, kiln_foz_pipelines_load) or N generated programs
 * (kiln_generate_spirv), and --background B generated programs outside the
 * schedule. A first-use schedule is drawn from --seed (stutter_schedule):
 * a quarter of the pipelines at frame 0 (the level load), then 0-2 new ones
 * a frame with a burst of 8-16 one frame in 40, all of them first used
 * within the first three quarters of the frames. Every mode replays the
 * same schedule, each in a child process of its own (bench_child_run) with
 * the drivers' disk caches off, a fresh Vulkan context whose
 * VkPipelineCache is empty and in memory only, and its peak memory reset:
 *
 * - sync: the frame thread builds what it needs. It asks a service whose
 *   executor refuses every task, so the build runs inside the request, on
 *   the frame thread (the same build path and builders as the other
 *   modes): what an emulator without kiln does.
 * - async: the service (kiln/service.h) with its own workers; the frame
 *   asks urgently and draws what is ready.
 * - fastlink: async with KILN_SERVICE_FAST_LINK (where the service and the
 *   device have it; else it reports fast_linked 0).
 *
 * With --shader-lead F (parts ahead of the draw, docs/runtime.md), each
 * schedule pipeline's library parts are asked for (KILN_REQUEST_PARTS_ONLY,
 * background) at the start of the frame F frames before its first use, and
 * those first used by frame F before the loop: a loading screen that lasts
 * until the frame-0 pipelines' parts are answered (timed apart, not a
 * frame). Only a service with fast-link takes them; elsewhere they are
 * refused (KILN_ENOTSUP) and counted, and the mode runs as without.
 *
 * Each also runs with the background programs asked for before frame 0:
 * at background priority on the mode's service (async modes), or on a
 * second service of its own workers (sync: background threads beside the
 * frame loop that the frame thread never waits for).
 *
 * A frame: the urgent requests of the pipelines first used in it, the
 * simulated draw cost (--draw-ms, slept: the game's own work, which leaves
 * the CPUs to the builds), then one draw per pipeline used so far, each
 * polling its ticket; a pipeline not ready is skipped and counted. The
 * frame's time is the frame thread's own work (its requests, with their
 * builds in sync mode, and its polls) plus the draw cost, not how late a
 * sleep woke on a busy machine; the loop then sleeps to the frame
 * boundary (a frame whose wall time passed it starts the next at once). The urgent
 * wait is each ticket's own (request to its first answer), over every
 * request and over those after frame 0 alone (the play, the level load's
 * burst apart); the time until every pipeline is optimized, from frame 0
 * to the last non-linked answer.
 *
 * The warm-start comparison: the schedule's programs stored in a cache in
 * the private folder (kiln_cache_put_program), then, each in a child of its
 * own, kiln_warm_start over it, and a service over it with every key asked
 * at background priority; both on an empty pipeline cache, so both compile
 * every pipeline, timed from the cache's open to the last pipeline.
 */
#include "bench_child.h"
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_FPS        60u
#define DEFAULT_FRAMES     600u
#define DEFAULT_BACKGROUND 16u
#define DEFAULT_GENERATE   24u
#define SLOWEST            8u /* the slowest urgent requests reported per mode */
#define DRAIN_NS           (600ull * 1000000000ull) /* the most a run waits after its frames */

static const char help[] =
    "usage: %s [options] ARCHIVE.foz|DIR...\n"
    "       %s --generate N [options]\n"
    "\n"
    "Replays a frame loop whose pipelines are first used on a schedule drawn\n"
    "from --seed (a burst at the level load, then a few a frame with bursts),\n"
    "in every mode, each in a process of its own with an empty pipeline cache:\n"
    "sync (the frame thread builds what it needs), async (the pipeline service;\n"
    "a draw whose pipeline is not ready is skipped) and fastlink (async with\n"
    "KILN_SERVICE_FAST_LINK), each without and with background builds. Prints\n"
    "frames over budget and over twice the budget, the worst frame, draws\n"
    "skipped, the urgent requests' wait at p50 and p99, the time until every\n"
    "pipeline is optimized and the peak memory, side by side; then a warm\n"
    "start against all-background service requests over the same cache.\n"
    "\n"
    "  ARCHIVE.foz|DIR  Fossilize archives, or folders of them (their *.foz and\n"
    "                  their subfolders', in name order)\n"
    "  --generate N    N programs of kiln's generator instead\n"
    "  --seed S        the schedule's and the generator's seed (default: a new\n"
    "                  one per run, printed)\n"
    "  --fps F         frames per second: the budget is 1/F (default %u)\n"
    "  --frames N      frames each mode runs (default %u)\n"
    "  --draw-ms MS    the simulated draw cost of a frame (default: a quarter\n"
    "                  of the budget)\n"
    "  --background B  generated programs built in the background beside the\n"
    "                  frame loop in the *_bg modes (default %u; 0: none)\n"
    "  --jobs N|auto   the service's workers (default auto)\n"
    "  --modes LIST    of sync,async,fastlink (default all three)\n"
    "  --no-warm-compare  skip the warm-start comparison\n"
    "  --same-priority  background builds at the frame's priority, not idle\n"
    "                  (the service's KILN_SERVICE_SAME_PRIORITY)\n"
    "  --no-urgent-hold  background builds start while urgent ones wait (the\n"
    "                  service's KILN_SERVICE_NO_URGENT_HOLD; default: held)\n"
    "  --shader-lead F  ask each pipeline's library parts (parts only, background)\n"
    "                  F frames before its first use; frame 0's on a loading\n"
    "                  screen before the loop (default 0: none)\n"
    "  --ahead WHAT    what --shader-lead asks ahead: parts (the default) or link\n"
    "                  (the linked pipeline, KILN_REQUEST_LINK_AHEAD)\n"
    "  --device N      the Vulkan device by index\n"
    "  --json          one JSON object on stdout\n"
    "  --help          this text\n";

enum mode_kind { M_SYNC, M_ASYNC, M_FAST, M_KINDS };

/* What the command was asked, and the programs every mode replays. */
struct stutter {
    const char *name;
    bool use_device;
    unsigned device;
    unsigned jobs;      /* the services' workers; 0: auto */
    bool same_priority; /* --same-priority: KILN_SERVICE_SAME_PRIORITY */
    bool no_hold;       /* --no-urgent-hold: KILN_SERVICE_NO_URGENT_HOLD */
    unsigned fps, frames, background;
    unsigned lead;   /* --shader-lead: frames of parts ahead (0: none) */
    bool link_ahead; /* --ahead link: the linked pipeline ahead, not its parts */
    uint64_t seed, budget_ns, draw_ns;
    struct kiln_program **progs; /* the schedule's, in order; NULL: left out */
    size_t n;
    struct kiln_program **bg; /* the background programs */
    size_t nbg;
    uint32_t *first; /* the frame progs[i] is first used in (nondecreasing) */
    size_t unloadable;
    bool foz, raytracing;
    size_t archives;
    struct kiln_foz_pipelines *fp;
    char tmp[CLI_PATH_MAX];
    struct kiln_key *keys; /* the warm comparison's cache: what it holds */
    size_t nkeys;
};

/* What one mode's child reports. Times in nanoseconds. */
struct mode_result {
    int rc;
    char why[160];
    char device[256], driver[256];
    unsigned workers;
    uint64_t over_budget, over_2x, worst_ns, frame_p50_ns, frame_p99_ns;
    uint64_t draws, draws_new, draws_skipped, first_draws_skipped;
    uint64_t ready, failed, request_errors;
    uint64_t wait_p50_ns, wait_p99_ns, svc_p50_ns, svc_p99_ns;
    uint64_t play_p50_ns, play_p99_ns; /* the urgent waits after frame 0 */
    /* --shader-lead: parts-only requests taken and refused, the service's
     * parts-only builds, and the loading screen's time. */
    uint64_t parts_asked, parts_refused, parts_only_built, whole_ahead, loading_ns;
    uint64_t background_holds; /* the frame service's (kiln_service_stats) */
    uint64_t fast_linked, optimized, built_urgent, built_background;
    bool all_optimized, bg_all_done;
    uint64_t all_optimized_ns, bg_built, bg_done_ns;
    uint64_t start_rss, peak_rss;
    bool hwm_reset;
    uint64_t linked_ahead; /* the service's (KILN_REQUEST_LINK_AHEAD) */
    /* The urgent requests that waited longest: their first-use frame,
     * wait and whether the answer was a linked pipeline. */
    struct slow {
        uint32_t frame;
        bool linked;
        uint64_t wait_ns;
    } slowest[SLOWEST];
    unsigned nslowest;
};

/* What one side of the warm-start comparison reports. */
struct warm_result {
    int rc;
    char why[160];
    uint64_t ns, built, failed;
};

/* One mode of the run: its kind and whether background builds run. */
struct mode {
    enum mode_kind kind;
    bool with_bg;
};

static const char *const kind_names[M_KINDS] = {"sync", "async", "fastlink"};

/* ---- the schedule ------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/*
 * Draws the first-use frame of each of n pipelines: a quarter (at least
 * one) at frame 0, then 0-2 a frame, a burst of 8-16 one frame in 40, and
 * never fewer than what is left spread over the frames left of the first
 * three quarters, so every pipeline is used with a quarter of the frames
 * still to come. The same (seed, n, frames) gives the same schedule.
 */
static void stutter_schedule(uint64_t seed, size_t n, unsigned frames, uint32_t *first)
{
    uint64_t s = seed ^ UINT64_C(0x5354555454455221);
    unsigned window = frames * 3 / 4 ? frames * 3 / 4 : 1;
    size_t i = 0, load = n / 4 ? n / 4 : n ? 1 : 0;
    for (; i < load; i++)
        first[i] = 0;
    for (unsigned f = 1; i < n; f++) {
        uint64_t r = splitmix(&s);
        size_t k = (size_t)(r % 3);
        if ((r >> 8) % 40 == 0)
            k += 8 + (size_t)((r >> 16) % 9);
        size_t left = n - i;
        size_t frames_left = f < window ? window - f : 1;
        size_t need = (left + frames_left - 1) / frames_left;
        k = k < need ? need : k;
        k = k > left ? left : k;
        uint32_t at = f < frames ? f : frames - 1;
        for (size_t j = 0; j < k; j++)
            first[i++] = at;
    }
}

/* ---- the programs ---------------------------------------------------------- */

/* A folder's entries to look at: *.foz and folders (not . and ..). */
static int foz_or_dir(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    if (e->d_name[0] == '.')
        return 0;
    return n <= 4 || strcmp(e->d_name + n - 4, ".foz") != 0 ? 2 : 1;
}

/* A growing list of archive paths. */
struct paths {
    char **v;
    size_t n, cap;
};

static int paths_add(struct paths *p, const char *path)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        char **grown = realloc(p->v, cap * sizeof(*grown));
        if (!grown)
            return KILN_ENOMEM;
        p->v = grown;
        p->cap = cap;
    }
    p->v[p->n] = strdup(path);
    return p->v[p->n++] ? KILN_OK : KILN_ENOMEM;
}

/*
 * Adds `path`: a file as it is, a folder's *.foz and its subfolders' in
 * name order (depth first). @return 0, or an error after one error line.
 */
static int collect(const char *name, const char *path, bool operand, struct paths *p)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        size_t n = strlen(path);
        bool foz = n > 4 && strcmp(path + n - 4, ".foz") == 0;
        return operand || foz ? paths_add(p, path) : KILN_OK;
    }
    struct dirent **ents = NULL;
    int m = scandir(path, &ents, foz_or_dir, alphasort);
    if (m < 0) {
        cli_error(name, "%s: cannot list the folder: %s", path, strerror(errno));
        return KILN_EIO;
    }
    int rc = KILN_OK;
    for (int k = 0; k < m; k++) {
        char sub[CLI_PATH_MAX + 260];
        snprintf(sub, sizeof(sub), "%s/%s", path, ents[k]->d_name);
        if (rc == KILN_OK)
            rc = collect(name, sub, false, p);
        free(ents[k]);
    }
    free(ents);
    return rc;
}

/* The archives the operands name. @return 0, or an error after one line. */
static int collect_archives(const char *name, char **ops, int nops, struct paths *p)
{
    for (int i = 0; i < nops; i++)
        CLI_TRY(collect(name, ops[i], true, p));
    return KILN_OK;
}

/* Reads the archives' distinct pipelines into s->progs. @return an exit code. */
static int load_archives(struct stutter *s, char **paths, size_t npaths)
{
    int rc = kiln_foz_pipelines_open((const char *const *)paths, npaths, &s->fp);
    if (rc < 0)
        return cli_exit_for(rc); /* the reader logged one line naming the file */
    s->archives = kiln_foz_pipelines_archives(s->fp);
    size_t n = kiln_foz_pipelines_count(s->fp);
    s->progs = calloc(n ? n : 1, sizeof(*s->progs));
    if (!s->progs)
        return KILN_EXIT_FAILED;
    for (size_t i = 0; i < n; i++) {
        const struct kiln_foz_pipelines_entry *e = kiln_foz_pipelines_get(s->fp, i);
        if (kiln_foz_pipelines_load(s->fp, i, &s->progs[s->n]) < 0) {
            s->unloadable++; /* one warning line logged */
            continue;
        }
        s->raytracing = s->raytracing || kiln_foz_kind_of(e->tag) == KILN_FOZ_KIND_RAYTRACING;
        s->n++;
    }
    return KILN_EXIT_OK;
}

/* Makes `count` generated programs from index `from` into out[]. @return an exit code. */
static int load_generated(struct stutter *s, uint32_t from, size_t count, struct kiln_program **out)
{
    struct kiln_glsl *g = NULL;
    int rc = kiln_glsl_create(KILN_GLSL_OPT_NONE, &g);
    if (rc < 0) {
        cli_error(s->name, "no GLSL translator: %s", kiln_strerror(rc));
        return KILN_EXIT_FAILED;
    }
    for (size_t i = 0; i < count && rc == KILN_OK; i++)
        rc = kiln_generate_spirv(kiln_glsl_translator(g), s->seed, from + (uint32_t)i, &out[i]);
    kiln_glsl_destroy(g);
    if (rc < 0) {
        cli_error(s->name, "making the generated programs failed: %s", kiln_strerror(rc));
        return KILN_EXIT_FAILED;
    }
    return KILN_EXIT_OK;
}

/* The programs of the run: the schedule's and the background's. */
static int load_programs(struct stutter *s, uint32_t generate, char **paths, size_t npaths)
{
    int ex = KILN_EXIT_OK;
    if (generate) {
        s->progs = calloc(generate, sizeof(*s->progs));
        if (!s->progs)
            return KILN_EXIT_FAILED;
        s->n = generate;
        ex = load_generated(s, 0, generate, s->progs);
    } else {
        s->foz = true;
        ex = load_archives(s, paths, npaths);
    }
    if (ex == KILN_EXIT_OK && s->n == 0) {
        cli_error(s->name, "no pipelines in the archives");
        return KILN_EXIT_USAGE;
    }
    s->nbg = s->background;
    s->bg = calloc(s->nbg ? s->nbg : 1, sizeof(*s->bg));
    if (ex == KILN_EXIT_OK && !s->bg)
        ex = KILN_EXIT_FAILED;
    if (ex == KILN_EXIT_OK && s->nbg)
        ex = load_generated(s, generate, s->nbg, s->bg); /* past the schedule's indices */
    s->first = calloc(s->n, sizeof(*s->first));
    if (ex == KILN_EXIT_OK && !s->first)
        ex = KILN_EXIT_FAILED;
    if (ex == KILN_EXIT_OK)
        stutter_schedule(s->seed, s->n, s->frames, s->first);
    return ex;
}

static void free_programs(struct stutter *s)
{
    for (size_t i = 0; s->progs && i < s->n; i++)
        kiln_program_destroy(s->progs[i]);
    for (size_t i = 0; s->bg && i < s->nbg; i++)
        kiln_program_destroy(s->bg[i]);
    free(s->progs);
    free(s->bg);
    free(s->first);
    free(s->keys);
    kiln_foz_pipelines_destroy(s->fp);
}

/* ---- a mode, in its child ------------------------------------------------- */

/* A pipeline's answers, as its callback saw them. */
enum { S_PENDING, S_LINKED, S_READY, S_FAILED };
struct slot {
    struct kiln_ticket *t;
    atomic_int state;
    _Atomic uint64_t first_wait; /* the first READY answer's wait_ns (+1: 0 is none) */
    _Atomic uint64_t final_at;   /* kiln_now_ns of the last answer (optimized or failed) */
    atomic_bool first_linked;    /* the first READY answer was a linked pipeline */
    /* The frame thread's own counts: draws and skipped draws of this
     * pipeline, and whether its first-use draw was skipped. */
    uint32_t draws, skipped;
    bool first_skipped;
};

static void on_answer(void *user, struct kiln_ticket *t, const struct kiln_ticket_info *info)
{
    (void)t;
    struct slot *s = user;
    if (info->state == KILN_TICKET_READY) {
        uint64_t none = 0;
        if (atomic_compare_exchange_strong(&s->first_wait, &none, info->wait_ns + 1))
            atomic_store(&s->first_linked, info->linked);
        if (info->linked) {
            int pending = S_PENDING;
            atomic_compare_exchange_strong(&s->state, &pending, S_LINKED);
            return;
        }
        atomic_store(&s->final_at, kiln_now_ns());
        atomic_store(&s->state, S_READY);
        return;
    }
    atomic_store(&s->final_at, kiln_now_ns());
    atomic_store(&s->state, S_FAILED);
}

/* An executor that takes nothing: the service's build runs inside the
 * request, on the thread that asked (the sync mode's frame thread). */
static int refuse_task(void (*fn)(void *arg), void *arg, void *user)
{
    (void)fn;
    (void)arg;
    (void)user;
    return -1;
}

/* Asks for program p into slot sl. @return 0, or the request's error (the
 * slot then FAILED). */
static int ask(struct kiln_service *svc, const struct kiln_program *p, enum kiln_priority prio,
               struct slot *sl)
{
    struct kiln_pipeline_request r = KILN_PIPELINE_REQUEST_INIT;
    r.program = p;
    r.priority = prio;
    r.on_done = on_answer;
    r.user = sl;
    int rc = kiln_service_request(svc, &r, &sl->t);
    if (rc < 0) {
        atomic_store(&sl->final_at, kiln_now_ns());
        atomic_store(&sl->state, S_FAILED);
    }
    return rc;
}

/* The services of one mode: the frame's and the one of the background builds. */
struct mode_ctx {
    const struct stutter *s;
    struct mode m;
    struct kiln_vk *vk;
    struct kiln_builder fb;
    struct kiln_service *svc, *bg_svc;
    struct slot *slots, *bg_slots;
    uint64_t *frame_ns;
    struct kiln_ticket **parts; /* --shader-lead: the parts-only tickets */
    size_t ahead;               /* the schedule's pipelines whose parts were asked */
};

static int make_service(struct mode_ctx *c, bool sync, struct kiln_service **out)
{
    static const struct kiln_executor refuse = {
        .size = sizeof(struct kiln_executor), .submit = refuse_task, .concurrency = 1};
    struct kiln_service_options o = KILN_SERVICE_OPTIONS_INIT;
    o.vk = c->vk;
    o.builders = c->s->foz ? &c->fb : NULL;
    o.nbuilders = c->s->foz ? 1 : 0;
    o.workers = sync ? 1 : c->s->jobs;
    o.executor = sync ? &refuse : NULL;
    o.flags = c->m.kind == M_FAST && !sync ? KILN_SERVICE_FAST_LINK : 0;
    if (c->s->same_priority)
        o.flags |= KILN_SERVICE_SAME_PRIORITY;
    if (c->s->no_hold)
        o.flags |= KILN_SERVICE_NO_URGENT_HOLD;
    return kiln_service_create(&o, out);
}

/* The child's Vulkan context, builder and services. @return 0 or an error (r->why says). */
static int mode_setup(struct mode_ctx *c, struct mode_result *r)
{
    int rc = bench_child_vk(c->s->use_device, c->s->device, c->s->raytracing, &c->vk);
    if (rc < 0) {
        snprintf(r->why, sizeof(r->why), "no Vulkan context");
        return rc;
    }
    const struct kiln_vk_info *vi = kiln_vk_get_info(c->vk);
    snprintf(r->device, sizeof(r->device), "%s", vi->device_name);
    snprintf(r->driver, sizeof(r->driver), "%s", vi->driver_info);
    c->fb = (struct kiln_builder)KILN_BUILDER_INIT;
    if (c->s->foz && (rc = kiln_foz_kiln_builder_create(NULL, &c->fb)) < 0) {
        snprintf(r->why, sizeof(r->why), "no Fossilize builder");
        return rc;
    }
    rc = make_service(c, c->m.kind == M_SYNC, &c->svc);
    if (rc == KILN_OK && c->m.with_bg && c->m.kind == M_SYNC)
        rc = make_service(c, false, &c->bg_svc);
    c->slots = calloc(c->s->n, sizeof(*c->slots));
    c->bg_slots = calloc(c->s->nbg ? c->s->nbg : 1, sizeof(*c->bg_slots));
    c->frame_ns = calloc(c->s->frames, sizeof(*c->frame_ns));
    c->parts = calloc(c->s->n, sizeof(*c->parts));
    if (rc == KILN_OK && (!c->slots || !c->bg_slots || !c->frame_ns || !c->parts))
        rc = KILN_ENOMEM;
    if (rc < 0)
        snprintf(r->why, sizeof(r->why), "starting the service");
    struct kiln_service_stats st = KILN_SERVICE_STATS_INIT;
    if (rc == KILN_OK && kiln_service_get_stats(c->bg_svc ? c->bg_svc : c->svc, &st) == 0)
        r->workers = st.workers;
    return rc;
}

static void sleep_until(uint64_t t)
{
    uint64_t now = kiln_now_ns();
    if (now >= t)
        return;
    struct timespec ts = {(time_t)((t - now) / 1000000000u), (long)((t - now) % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* --shader-lead: asks the parts (or, --ahead link, the linked pipelines)
 * of the schedule's pipelines first used by frame `by` not asked yet
 * (background; a service without fast-link refuses parts, and links are
 * asked in the fastlink modes only: the others count them refused). */
static void ask_parts_until(struct mode_ctx *c, uint64_t by, struct mode_result *r)
{
    const struct stutter *s = c->s;
    for (; s->lead && c->ahead < s->n && s->first[c->ahead] <= by; c->ahead++) {
        struct kiln_pipeline_request q = KILN_PIPELINE_REQUEST_INIT;
        q.program = s->progs[c->ahead];
        q.priority = KILN_PRIORITY_BACKGROUND;
        q.flags = s->link_ahead ? KILN_REQUEST_LINK_AHEAD : KILN_REQUEST_PARTS_ONLY;
        /* Links ahead only where parts could be asked: elsewhere they
         * would be whole builds (in sync mode on the frame thread). */
        bool fast = c->m.kind == M_FAST;
        if ((fast || !s->link_ahead) &&
            kiln_service_request(c->svc, &q, &c->parts[c->ahead]) == KILN_OK)
            r->parts_asked++;
        else
            r->parts_refused++;
    }
}

/* --shader-lead: the loading screen before frame 0: the parts of the
 * pipelines first used by frame F asked, those of frame 0 waited for. */
static void loading_screen(struct mode_ctx *c, struct mode_result *r)
{
    const struct stutter *s = c->s;
    uint64_t t0 = kiln_now_ns();
    ask_parts_until(c, s->lead, r);
    for (size_t i = 0; s->lead && i < s->n && s->first[i] == 0; i++) {
        uint64_t spent = kiln_now_ns() - t0;
        if (c->parts[i] && spent < DRAIN_NS)
            kiln_ticket_wait(c->parts[i], DRAIN_NS - spent, NULL);
    }
    r->loading_ns = kiln_now_ns() - t0;
}

/*
 * One frame: its requests, the draw cost (slept), its draws. @return the
 * frame's time: the frame thread's own work (its requests, with their
 * builds in sync mode, and its polls) plus the draw cost; how late the
 * sleep woke up is the machine's, not the mode's, and is not counted.
 */
static uint64_t run_frame(struct mode_ctx *c, uint32_t f, size_t *scene, struct mode_result *r)
{
    const struct stutter *s = c->s;
    uint64_t start = kiln_now_ns();
    size_t first_new = *scene;
    ask_parts_until(c, (uint64_t)f + s->lead, r); /* the shaders seen F frames ahead */
    while (*scene < s->n && s->first[*scene] == f) {
        if (ask(c->svc, s->progs[*scene], KILN_PRIORITY_URGENT, &c->slots[*scene]) < 0)
            r->request_errors++;
        (*scene)++;
    }
    uint64_t asked = kiln_now_ns();
    sleep_until(asked + s->draw_ns);
    uint64_t draws = kiln_now_ns();
    for (size_t i = 0; i < *scene; i++) {
        struct slot *sl = &c->slots[i];
        int st = sl->t ? kiln_ticket_poll(sl->t, NULL) : KILN_TICKET_FAILED;
        if (st == KILN_TICKET_FAILED || st == KILN_TICKET_CANCELED)
            continue; /* no pipeline to draw with, in any mode */
        sl->draws++;
        if (st == KILN_TICKET_PENDING) {
            sl->skipped++;
            sl->first_skipped = sl->first_skipped || i >= first_new;
        }
    }
    return (asked - start) + s->draw_ns + (kiln_now_ns() - draws);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The p-th percentile (0..100) of v[0..n) (sorted in place); 0 when n is 0. */
static uint64_t percentile(uint64_t *v, size_t n, unsigned p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_u64);
    size_t i = (n * p + 99) / 100;
    return v[i ? i - 1 : 0];
}

/* Waits until every slot of `sl` has its last answer, at most until `end`.
 * @return whether all have; *last: the latest answer's time. */
static bool drain(const struct slot *sl, size_t n, uint64_t end, uint64_t *last)
{
    for (size_t i = 0; i < n; i++)
        while (atomic_load(&sl[i].state) < S_READY && kiln_now_ns() < end)
            sleep_until(kiln_now_ns() + 1000000u);
    *last = 0;
    bool all = true;
    for (size_t i = 0; i < n; i++) {
        all = all && atomic_load(&sl[i].state) >= S_READY;
        uint64_t t = atomic_load(&sl[i].final_at);
        *last = t > *last ? t : *last;
    }
    return all;
}

static int by_wait_desc(const void *a, const void *b)
{
    uint64_t x = ((const struct slow *)a)->wait_ns, y = ((const struct slow *)b)->wait_ns;
    return x > y ? -1 : x < y;
}

/* The SLOWEST urgent requests that waited longest, slowest first (none
 * when the list cannot be allocated: the report goes on without it). */
static void slowest_of(const struct mode_ctx *c, struct mode_result *r)
{
    struct slow *all = calloc(c->s->n ? c->s->n : 1, sizeof(*all));
    if (!all)
        return;
    size_t m = 0;
    for (size_t i = 0; i < c->s->n; i++) {
        uint64_t fw = atomic_load(&c->slots[i].first_wait);
        if (fw)
            all[m++] = (struct slow){.frame = c->s->first[i],
                                     .linked = atomic_load(&c->slots[i].first_linked),
                                     .wait_ns = fw - 1};
    }
    qsort(all, m, sizeof(*all), by_wait_desc);
    r->nslowest = m < SLOWEST ? (unsigned)m : SLOWEST;
    memcpy(r->slowest, all, r->nslowest * sizeof(*all));
    free(all);
}

/* The figures of the frames and the tickets, after the loop from t0. */
static void mode_figures(struct mode_ctx *c, uint64_t t0, struct mode_result *r)
{
    const struct stutter *s = c->s;
    uint64_t end = kiln_now_ns() + DRAIN_NS, last = 0;
    r->all_optimized = drain(c->slots, s->n, end, &last);
    r->all_optimized_ns = last > t0 ? last - t0 : 0;
    if (c->m.with_bg) {
        r->bg_all_done = drain(c->bg_slots, s->nbg, end, &last);
        r->bg_done_ns = last > t0 ? last - t0 : 0;
        for (size_t i = 0; i < s->nbg; i++)
            r->bg_built += atomic_load(&c->bg_slots[i].state) == S_READY;
    }
    r->frame_p50_ns = percentile(c->frame_ns, s->frames, 50);
    r->frame_p99_ns = percentile(c->frame_ns, s->frames, 99);
    uint64_t *w = calloc(s->n, sizeof(*w)), *play = calloc(s->n, sizeof(*play));
    size_t nw = 0, np = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct slot *sl = &c->slots[i];
        int st = atomic_load(&sl->state);
        r->ready += st == S_READY;
        r->failed += st == S_FAILED;
        if (st != S_FAILED) {
            /* A pipeline that failed is drawn in no mode: its draws before
             * the failure was known are not counted either. */
            r->draws += sl->draws;
            r->draws_new += sl->draws > 0;
            r->draws_skipped += sl->skipped;
            r->first_draws_skipped += sl->first_skipped;
        }
        uint64_t fw = atomic_load(&c->slots[i].first_wait);
        if (w && fw)
            w[nw++] = fw - 1;
        if (play && fw && s->first[i] > 0)
            play[np++] = fw - 1;
    }
    slowest_of(c, r);
    r->wait_p50_ns = percentile(w, nw, 50);
    r->wait_p99_ns = percentile(w, nw, 99);
    r->play_p50_ns = percentile(play, np, 50);
    r->play_p99_ns = percentile(play, np, 99);
    free(w);
    free(play);
    struct kiln_service_stats st = KILN_SERVICE_STATS_INIT;
    if (kiln_service_get_stats(c->svc, &st) == 0) {
        r->svc_p50_ns = st.urgent_p50_ns;
        r->svc_p99_ns = st.urgent_p99_ns;
        r->fast_linked = st.fast_linked;
        r->optimized = st.optimized;
        r->built_urgent = st.built_urgent;
        r->built_background = st.built_background;
        r->parts_only_built = st.parts_only_built;
        r->whole_ahead = st.whole_ahead;
        r->background_holds = st.background_holds;
        r->linked_ahead = st.linked_ahead;
    }
}

/* Runs one mode in this (child) process. Nothing is freed: the process ends. */
static void mode_child(const struct stutter *s, struct mode m, struct mode_result *r)
{
    memset(r, 0, sizeof(*r));
    bench_child_no_disk_cache();
    r->hwm_reset = bench_child_reset_peak();
    r->start_rss = kiln_rss_bytes();
    struct mode_ctx c = {.s = s, .m = m};
    r->rc = mode_setup(&c, r);
    if (r->rc < 0)
        return;
    loading_screen(&c, r);
    uint64_t t0 = kiln_now_ns();
    struct kiln_service *bg_svc = c.bg_svc ? c.bg_svc : c.svc;
    for (size_t i = 0; m.with_bg && i < s->nbg; i++)
        if (ask(bg_svc, s->bg[i], KILN_PRIORITY_BACKGROUND, &c.bg_slots[i]) < 0)
            r->request_errors++;
    size_t scene = 0;
    uint64_t next = t0;
    for (uint32_t f = 0; f < s->frames; f++) {
        sleep_until(next);
        uint64_t start = kiln_now_ns();
        uint64_t ft = run_frame(&c, f, &scene, r);
        c.frame_ns[f] = ft;
        r->over_budget += ft > s->budget_ns;
        r->over_2x += ft > 2 * s->budget_ns;
        r->worst_ns = ft > r->worst_ns ? ft : r->worst_ns;
        next = start + s->budget_ns;
    }
    mode_figures(&c, t0, r);
    r->peak_rss = bench_child_peak_rss(r->hwm_reset);
}

struct mode_arg {
    const struct stutter *s;
    struct mode m;
};

static void mode_entry(void *arg, void *result)
{
    const struct mode_arg *a = arg;
    mode_child(a->s, a->m, result);
}

/* ---- the warm-start comparison ------------------------------------------- */

/* Stores the schedule's programs in a cache in the private folder. @return
 * an exit code. */
static int warm_store(struct stutter *s, const char *dir)
{
    struct kiln_cache_options co = KILN_CACHE_OPTIONS_INIT;
    co.flags = KILN_CACHE_CREATE;
    co.stamp = UINT64_C(0x737475747465720a);
    struct kiln_cache *c = NULL;
    if (cli_open_cache(s->name, dir, &co, &c) != KILN_EXIT_OK)
        return KILN_EXIT_FAILED;
    s->keys = calloc(s->n, sizeof(*s->keys));
    int rc = s->keys ? KILN_OK : KILN_ENOMEM;
    for (size_t i = 0; i < s->n && rc == KILN_OK; i++)
        if (kiln_cache_put_program(c, s->progs[i], NULL, &s->keys[s->nkeys]) == KILN_OK)
            s->nkeys++; /* a module the seal refuses is left out (logged) */
    if (rc == KILN_OK)
        rc = kiln_cache_sync(c);
    kiln_cache_close(c);
    if (rc < 0) {
        cli_error(s->name, "%s: storing the programs failed: %s", dir, kiln_strerror(rc));
        return KILN_EXIT_FAILED;
    }
    return KILN_EXIT_OK;
}

/* kiln_warm_start over the cache, timed from its open to its last pipeline. */
static void warm_start_side(const struct stutter *s, const char *dir, struct kiln_vk *vk,
                            const struct kiln_builder *fb, struct warm_result *r)
{
    struct kiln_start_options o = KILN_START_OPTIONS_INIT;
    o.cache_dir = dir;
    o.any_stamp = true;
    o.read_only = true;
    o.jobs = s->jobs;
    o.vk = vk;
    o.builders = s->foz ? fb : NULL;
    o.nbuilders = s->foz ? 1 : 0;
    struct kiln_start_summary sum = KILN_START_SUMMARY_INIT;
    uint64_t t0 = kiln_now_ns();
    r->rc = kiln_warm_start(&o, NULL, NULL, &sum);
    r->ns = kiln_now_ns() - t0;
    r->built = sum.pipelines_built;
    r->failed = sum.pipelines_failed + sum.pipelines_skipped;
    if (r->rc < 0)
        snprintf(r->why, sizeof(r->why), "kiln_warm_start");
}

/* The service over the cache, every key asked at background priority. */
static void service_side(const struct stutter *s, const char *dir, struct kiln_vk *vk,
                         const struct kiln_builder *fb, struct warm_result *r)
{
    uint64_t t0 = kiln_now_ns();
    struct kiln_cache_options co = KILN_CACHE_OPTIONS_INIT;
    co.flags = KILN_CACHE_READ_ONLY | KILN_CACHE_ANY_STAMP | KILN_CACHE_USE_DICT;
    struct kiln_cache *c = NULL;
    struct kiln_service *svc = NULL;
    struct kiln_ticket **t = calloc(s->nkeys ? s->nkeys : 1, sizeof(*t));
    r->rc = t ? kiln_cache_open(dir, &co, &c) : KILN_ENOMEM;
    struct kiln_service_options o = KILN_SERVICE_OPTIONS_INIT;
    o.vk = vk;
    o.cache = c;
    o.builders = s->foz ? fb : NULL;
    o.nbuilders = s->foz ? 1 : 0;
    o.workers = s->jobs;
    if (r->rc == KILN_OK)
        r->rc = kiln_service_create(&o, &svc);
    for (size_t i = 0; i < s->nkeys && r->rc == KILN_OK; i++) {
        struct kiln_pipeline_request q = KILN_PIPELINE_REQUEST_INIT;
        q.key = s->keys[i];
        q.priority = KILN_PRIORITY_BACKGROUND;
        r->rc = kiln_service_request(svc, &q, &t[i]);
    }
    for (size_t i = 0; i < s->nkeys && r->rc == KILN_OK; i++) {
        int st = kiln_ticket_wait(t[i], UINT64_MAX, NULL);
        r->built += st == KILN_TICKET_READY;
        r->failed += st != KILN_TICKET_READY;
    }
    r->ns = kiln_now_ns() - t0;
    if (r->rc < 0)
        snprintf(r->why, sizeof(r->why), "the service over the cache");
}

struct warm_arg {
    const struct stutter *s;
    const char *dir;
    bool service;
};

static void warm_entry(void *arg, void *result)
{
    const struct warm_arg *a = arg;
    struct warm_result *r = result;
    memset(r, 0, sizeof(*r));
    bench_child_no_disk_cache();
    struct kiln_vk *vk = NULL;
    struct kiln_builder fb = KILN_BUILDER_INIT;
    r->rc = bench_child_vk(a->s->use_device, a->s->device, a->s->raytracing, &vk);
    if (r->rc == KILN_OK && a->s->foz)
        r->rc = kiln_foz_kiln_builder_create(NULL, &fb);
    if (r->rc < 0) {
        snprintf(r->why, sizeof(r->why), "no Vulkan context or builder");
        return;
    }
    if (a->service)
        service_side(a->s, a->dir, vk, &fb, r);
    else
        warm_start_side(a->s, a->dir, vk, &fb, r);
}

/* ---- running every mode ------------------------------------------------------ */

static int run_child(const struct stutter *s, const char *what, bench_child_fn fn, void *arg,
                     void *result, size_t size, const int *rc, const char *why)
{
    if (bench_child_run(s->name, what, fn, arg, result, size) < 0)
        return KILN_EIO;
    if (*rc < 0) {
        cli_error(s->name, "%s: %s: %s", what, why, kiln_strerror(*rc));
        cli_note_code(*rc);
        return *rc;
    }
    return KILN_OK;
}

static int run_mode(const struct stutter *s, struct mode m, bool json, struct mode_result *r)
{
    struct mode_arg a = {.s = s, .m = m};
    char what[96];
    snprintf(what, sizeof(what), "the %s run%s", kind_names[m.kind],
             m.with_bg ? " with background builds" : "");
    if (!json)
        fprintf(stderr, "%s: %u frames...\n", what, s->frames);
    return run_child(s, what, mode_entry, &a, r, sizeof(*r), &r->rc, r->why);
}

static int run_warm(struct stutter *s, bool json, struct warm_result *w)
{
    char dir[CLI_PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/warm", s->tmp);
    if (warm_store(s, dir) != KILN_EXIT_OK)
        return KILN_EIO;
    if (!json)
        fprintf(stderr, "warm start against all-background service requests (%zu programs)...\n",
                s->nkeys);
    for (int k = 0; k < 2; k++) {
        struct warm_arg a = {.s = s, .dir = dir, .service = k == 1};
        const char *what = k ? "the all-background service run" : "the warm-start run";
        int rc = run_child(s, what, warm_entry, &a, &w[k], sizeof(w[k]), &w[k].rc, w[k].why);
        if (rc < 0)
            return rc;
    }
    return KILN_OK;
}

/* ---- the report ------------------------------------------------------------- */

static double ms_of(uint64_t ns)
{
    return (double)ns / 1e6;
}

static void mode_label(struct mode m, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s", kind_names[m.kind], m.with_bg ? "_bg" : "");
}

/* over / under as a ratio, or null when under is 0. */
static void json_ratio(struct cli_json *j, const char *key, double over, double under)
{
    if (under > 0)
        cli_json_double(j, key, over / under);
    else
        cli_json_null(j, key);
}

static void json_mode(struct cli_json *j, const struct stutter *s, struct mode m,
                      const struct mode_result *r)
{
    char label[32];
    mode_label(m, label, sizeof(label));
    cli_json_object_begin(j, NULL);
    cli_json_str(j, "mode", label);
    cli_json_u64(j, "background", m.with_bg ? s->nbg : 0);
    cli_json_u64(j, "workers", r->workers);
    cli_json_u64(j, "frames", s->frames);
    cli_json_u64(j, "over_budget", r->over_budget);
    cli_json_u64(j, "over_2x_budget", r->over_2x);
    cli_json_double(j, "worst_frame_ms", ms_of(r->worst_ns));
    cli_json_double(j, "frame_p50_ms", ms_of(r->frame_p50_ns));
    cli_json_double(j, "frame_p99_ms", ms_of(r->frame_p99_ns));
    cli_json_u64(j, "draws", r->draws);
    cli_json_u64(j, "draws_new", r->draws_new);
    cli_json_u64(j, "draws_skipped", r->draws_skipped);
    cli_json_u64(j, "first_draws_skipped", r->first_draws_skipped);
    json_ratio(j, "skipped_per_new_draw", (double)r->draws_skipped, (double)r->draws_new);
    cli_json_u64(j, "pipelines_ready", r->ready);
    cli_json_u64(j, "pipelines_failed", r->failed);
    cli_json_u64(j, "request_errors", r->request_errors);
    cli_json_double(j, "urgent_wait_p50_ms", ms_of(r->wait_p50_ns));
    cli_json_double(j, "urgent_wait_p99_ms", ms_of(r->wait_p99_ns));
    cli_json_double(j, "urgent_wait_p99_frames", (double)r->wait_p99_ns / (double)s->budget_ns);
    cli_json_double(j, "play_urgent_wait_p50_ms", ms_of(r->play_p50_ns));
    cli_json_double(j, "play_urgent_wait_p99_ms", ms_of(r->play_p99_ns));
    cli_json_double(j, "play_urgent_wait_p99_frames",
                    (double)r->play_p99_ns / (double)s->budget_ns);
    cli_json_u64(j, "parts_ahead_asked", r->parts_asked);
    cli_json_u64(j, "parts_ahead_refused", r->parts_refused);
    cli_json_u64(j, "parts_only_built", r->parts_only_built);
    cli_json_u64(j, "whole_ahead", r->whole_ahead);
    cli_json_double(j, "loading_screen_ms", ms_of(r->loading_ns));
    cli_json_u64(j, "background_holds", r->background_holds);
    cli_json_u64(j, "linked_ahead", r->linked_ahead);
    cli_json_array_begin(j, "slowest_urgent");
    for (unsigned i = 0; i < r->nslowest; i++) {
        cli_json_object_begin(j, NULL);
        cli_json_u64(j, "frame", r->slowest[i].frame);
        cli_json_double(j, "wait_ms", ms_of(r->slowest[i].wait_ns));
        cli_json_bool(j, "linked", r->slowest[i].linked);
        cli_json_object_end(j);
    }
    cli_json_array_end(j);
    cli_json_double(j, "service_urgent_p50_ms", ms_of(r->svc_p50_ns));
    cli_json_double(j, "service_urgent_p99_ms", ms_of(r->svc_p99_ns));
    cli_json_u64(j, "fast_linked", r->fast_linked);
    cli_json_u64(j, "optimized", r->optimized);
    cli_json_u64(j, "built_urgent", r->built_urgent);
    cli_json_u64(j, "built_background", r->built_background);
    if (r->all_optimized)
        cli_json_double(j, "all_optimized_ms", ms_of(r->all_optimized_ns));
    else
        cli_json_null(j, "all_optimized_ms");
    cli_json_u64(j, "background_built", r->bg_built);
    if (m.with_bg && r->bg_all_done)
        cli_json_double(j, "background_done_ms", ms_of(r->bg_done_ns));
    else
        cli_json_null(j, "background_done_ms");
    cli_json_u64(j, "start_rss_bytes", r->start_rss);
    cli_json_u64(j, "peak_rss_bytes", r->peak_rss);
    cli_json_object_end(j);
}

/* The run's result for (kind, with_bg), or NULL when it did not run. */
static const struct mode_result *find(const struct mode *modes, const struct mode_result *res,
                                      unsigned n, enum mode_kind k, bool bg)
{
    for (unsigned i = 0; i < n; i++)
        if (modes[i].kind == k && modes[i].with_bg == bg)
            return &res[i];
    return NULL;
}

/* "over_budget_sync_vs_async" and the rest: sync's frames over budget over
 * each async mode's, without and with background builds. */
static void json_ratios(struct cli_json *j, const struct mode *modes, const struct mode_result *res,
                        unsigned n)
{
    cli_json_object_begin(j, "ratios");
    for (int bg = 0; bg < 2; bg++)
        for (int k = M_ASYNC; k < M_KINDS; k++) {
            const struct mode_result *a = find(modes, res, n, M_SYNC, bg);
            const struct mode_result *b = find(modes, res, n, (enum mode_kind)k, bg);
            if (!a || !b)
                continue;
            char key[64];
            snprintf(key, sizeof(key), "over_budget_sync_vs_%s%s", kind_names[k], bg ? "_bg" : "");
            json_ratio(j, key, (double)a->over_budget, (double)b->over_budget);
        }
    cli_json_object_end(j);
}

static void json_warm(struct cli_json *j, const struct stutter *s, const struct warm_result *w)
{
    cli_json_object_begin(j, "warm_compare");
    cli_json_u64(j, "programs", s->nkeys);
    cli_json_u64(j, "warm_start_built", w[0].built);
    cli_json_u64(j, "service_built", w[1].built);
    json_ratio(j, "service_vs_warm_start", (double)w[1].ns, (double)w[0].ns);
    cli_json_object_end(j);
}

/* What print_json and print_text are given. */
struct report {
    const struct stutter *s;
    const struct mode *modes;
    const struct mode_result *res;
    unsigned n;
    const struct warm_result *warm; /* NULL: not run */
    double load_secs;
};

static void print_json(const struct report *rp)
{
    const struct stutter *s = rp->s;
    struct cli_json j;
    cli_json_begin(&j);
    cli_json_str(&j, "device", rp->res[0].device);
    cli_json_str(&j, "driver", rp->res[0].driver);
    cli_json_str(&j, "source", s->foz ? "archives" : "generate");
    cli_json_u64(&j, "archives", s->archives);
    cli_json_u64(&j, "pipelines", s->n);
    cli_json_u64(&j, "unreadable", s->unloadable);
    cli_json_u64(&j, "background_programs", s->nbg);
    cli_json_bool(&j, "same_priority", s->same_priority);
    cli_json_u64(&j, "shader_lead_frames", s->lead);
    cli_json_str(&j, "ahead", s->link_ahead ? "link" : "parts");
    cli_json_bool(&j, "urgent_hold", !s->no_hold);
    cli_json_u64(&j, "seed", s->seed);
    cli_json_u64(&j, "fps", s->fps);
    cli_json_double(&j, "budget_ms", ms_of(s->budget_ns));
    cli_json_double(&j, "draw_ms", ms_of(s->draw_ns));
    cli_json_u64(&j, "frames", s->frames);
    cli_json_u64(&j, "load_burst", s->n / 4 ? s->n / 4 : 1);
    cli_json_u64(&j, "last_first_use_frame", s->first[s->n - 1]);
    cli_json_str(&j, "peak_rss_method", rp->res[0].hwm_reset ? "clear_refs" : "getrusage");
    cli_json_array_begin(&j, "modes");
    for (unsigned i = 0; i < rp->n; i++)
        json_mode(&j, s, rp->modes[i], &rp->res[i]);
    cli_json_array_end(&j);
    json_ratios(&j, rp->modes, rp->res, rp->n);
    if (rp->warm)
        json_warm(&j, s, rp->warm);
    else
        cli_json_null(&j, "warm_compare");
    cli_json_object_begin(&j, "seconds");
    cli_json_double(&j, "load", rp->load_secs);
    if (rp->warm) {
        cli_json_double(&j, "warm_start", (double)rp->warm[0].ns / 1e9);
        cli_json_double(&j, "service_background", (double)rp->warm[1].ns / 1e9);
    }
    cli_json_object_end(&j);
    cli_json_end(&j);
}

/* One row of the side-by-side table: a figure of every mode. */
typedef void (*cell_fn)(const struct stutter *s, struct mode m, const struct mode_result *r,
                        char *buf, size_t cap);

#define CELL(fname, fmt, ...)                                                              \
    static void fname(const struct stutter *s, struct mode m, const struct mode_result *r, \
                      char *buf, size_t cap)                                               \
    {                                                                                      \
        (void)s;                                                                           \
        (void)m;                                                                           \
        snprintf(buf, cap, fmt, __VA_ARGS__);                                              \
    }
CELL(c_over, "%" PRIu64, r->over_budget)
CELL(c_over2, "%" PRIu64, r->over_2x)
CELL(c_worst, "%.1f", ms_of(r->worst_ns))
CELL(c_p99f, "%.1f", ms_of(r->frame_p99_ns))
CELL(c_draws, "%" PRIu64, r->draws)
CELL(c_skip, "%" PRIu64, r->draws_skipped)
CELL(c_fskip, "%" PRIu64 "/%" PRIu64, r->first_draws_skipped, r->draws_new)
CELL(c_w50, "%.1f", ms_of(r->wait_p50_ns))
CELL(c_w99, "%.1f", ms_of(r->wait_p99_ns))
CELL(c_w99f, "%.2f", (double)r->wait_p99_ns / (double)s->budget_ns)
CELL(c_p50play, "%.1f", ms_of(r->play_p50_ns))
CELL(c_p99play, "%.1f", ms_of(r->play_p99_ns))
CELL(c_p99playf, "%.2f", (double)r->play_p99_ns / (double)s->budget_ns)
CELL(c_parts, "%" PRIu64 "/%" PRIu64, r->parts_asked, r->parts_asked + r->parts_refused)
CELL(c_loading, "%.0f", ms_of(r->loading_ns))
CELL(c_linked, "%" PRIu64, r->fast_linked)
CELL(c_failed, "%" PRIu64, r->failed)
CELL(c_peak, "%.0f", (double)r->peak_rss / (1024.0 * 1024.0))
#undef CELL

static void c_allopt(const struct stutter *s, struct mode m, const struct mode_result *r, char *buf,
                     size_t cap)
{
    (void)s;
    (void)m;
    if (r->all_optimized)
        snprintf(buf, cap, "%.0f", ms_of(r->all_optimized_ns));
    else
        snprintf(buf, cap, "-");
}

static void c_bgdone(const struct stutter *s, struct mode m, const struct mode_result *r, char *buf,
                     size_t cap)
{
    if (m.with_bg && r->bg_all_done)
        snprintf(buf, cap, "%" PRIu64 "/%zu %.0f", r->bg_built, s->nbg, ms_of(r->bg_done_ns));
    else
        snprintf(buf, cap, "-");
}

static void print_table(const struct report *rp)
{
    static const struct {
        const char *label;
        cell_fn fn;
    } rows[] = {
        {"frames over budget", c_over},
        {"frames over 2x budget", c_over2},
        {"worst frame ms", c_worst},
        {"frame p99 ms", c_p99f},
        {"draws", c_draws},
        {"draws skipped", c_skip},
        {"first draws skipped/new", c_fskip},
        {"urgent wait p50 ms", c_w50},
        {"urgent wait p99 ms", c_w99},
        {"urgent wait p99 frames", c_w99f},
        {"play wait p50 ms", c_p50play},
        {"play wait p99 ms", c_p99play},
        {"play wait p99 frames", c_p99playf},
        {"ahead taken/asked", c_parts},
        {"loading screen ms", c_loading},
        {"fast-linked", c_linked},
        {"pipelines failed", c_failed},
        {"all optimized ms", c_allopt},
        {"background built, ms", c_bgdone},
        {"peak MiB", c_peak},
    };
    printf("\n  %-24s", "");
    for (unsigned i = 0; i < rp->n; i++) {
        char label[32];
        mode_label(rp->modes[i], label, sizeof(label));
        printf(" %12s", label);
    }
    printf("\n");
    for (size_t k = 0; k < CLI_ARRAY_LEN(rows); k++) {
        printf("  %-24s", rows[k].label);
        for (unsigned i = 0; i < rp->n; i++) {
            char cell[64];
            rows[k].fn(rp->s, rp->modes[i], &rp->res[i], cell, sizeof(cell));
            printf(" %12s", cell);
        }
        printf("\n");
    }
}

/* Sync's frames over budget against each async mode's, with and without
 * background builds. */
static void print_ratios(const struct report *rp)
{
    bool first = true;
    for (int bg = 0; bg < 2; bg++)
        for (int k = M_ASYNC; k < M_KINDS; k++) {
            const struct mode_result *a = find(rp->modes, rp->res, rp->n, M_SYNC, bg);
            const struct mode_result *b = find(rp->modes, rp->res, rp->n, (enum mode_kind)k, bg);
            if (!a || !b)
                continue;
            const char *sfx = bg ? "_bg" : "";
            printf("%s  frames over budget, sync%s / %s%s: %" PRIu64 " / %" PRIu64,
                   first ? "\n" : "", sfx, kind_names[k], sfx, a->over_budget, b->over_budget);
            first = false;
            if (b->over_budget)
                printf(" = %.1fx\n", (double)a->over_budget / (double)b->over_budget);
            else
                printf(" (none in %s%s)\n", kind_names[k], sfx);
        }
}

static void print_text(const struct report *rp)
{
    const struct stutter *s = rp->s;
    printf("kiln bench stutter: %zu pipeline%s from %s, %u frames at %u fps (budget %.1f ms, "
           "draw cost %.1f ms), seed %016" PRIx64 "\n",
           s->n, CLI_S(s->n), s->foz ? "archives" : "the generator", s->frames, s->fps,
           ms_of(s->budget_ns), ms_of(s->draw_ns), s->seed);
    if (s->foz)
        printf("  %zu archive%s, %zu pipeline%s left out (unreadable)\n", s->archives,
               CLI_S(s->archives), s->unloadable, CLI_S(s->unloadable));
    printf("  %zu at the level load, the last first used at frame %" PRIu32
           "; *_bg: %zu generated programs built in the background\n",
           s->n / 4 ? s->n / 4 : (size_t)1, s->first[s->n - 1], s->nbg);
    printf("  urgent hold %s; shader lead %u frame%s%s; play wait: urgent requests after frame 0\n",
           s->no_hold ? "off" : "on", s->lead, CLI_S(s->lead),
           s->lead ? " (parts only, asked ahead; frame 0's on a loading screen)" : " (off)");
    printf("  on %s (%s), %u service worker%s; each mode in a fresh process, empty pipeline "
           "cache\n",
           rp->res[0].device, rp->res[0].driver, rp->res[rp->n - 1].workers,
           CLI_S(rp->res[rp->n - 1].workers));
    print_table(rp);
    print_ratios(rp);
    const struct warm_result *w = rp->warm;
    if (w)
        printf("\n  warm start (kiln_warm_start) %.3f s, %" PRIu64
               " built; all-background service requests %.3f s, %" PRIu64 " built: %.3fx\n",
               (double)w[0].ns / 1e9, w[0].built, (double)w[1].ns / 1e9, w[1].built,
               w[0].ns ? (double)w[1].ns / (double)w[0].ns : 0.0);
}

/* ---- the command line ------------------------------------------------------- */

/* Parses --modes: a comma-separated list of sync, async, fastlink. */
static int parse_modes(const char *name, const char *text, bool *want)
{
    for (int k = 0; k < M_KINDS; k++)
        want[k] = false;
    const char *p = text;
    while (*p) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int k = 0; k < M_KINDS; k++)
            if (strlen(kind_names[k]) == len && strncmp(p, kind_names[k], len) == 0)
                found = k;
        if (found < 0)
            return cli_usage_error(name, "--modes: expected sync, async or fastlink, got '%.*s'",
                                   (int)len, p);
        want[found] = true;
        p += len + (p[len] == ',');
    }
    for (int k = 0; k < M_KINDS; k++)
        if (want[k])
            return KILN_EXIT_OK;
    return cli_usage_error(name, "--modes: empty list");
}

/* What the command line asked. */
struct options {
    uint32_t generate;
    bool seed_given, json, warm;
    bool want[M_KINDS];
    double draw_ms; /* < 0: a quarter of the budget */
};

static int parse_options(int argc, char **argv, struct stutter *s, struct options *o)
{
    const char *name = argv[0];
    static const struct option longopts[] = {
        {"generate", required_argument, NULL, 'g'},
        {"seed", required_argument, NULL, 's'},
        {"fps", required_argument, NULL, 'f'},
        {"frames", required_argument, NULL, 'F'},
        {"draw-ms", required_argument, NULL, 'D'},
        {"background", required_argument, NULL, 'b'},
        {"jobs", required_argument, NULL, 'j'},
        {"modes", required_argument, NULL, 'm'},
        {"no-warm-compare", no_argument, NULL, 'W'},
        {"same-priority", no_argument, NULL, 'P'},
        {"shader-lead", required_argument, NULL, 'L'},
        {"ahead", required_argument, NULL, 'A'},
        {"no-urgent-hold", no_argument, NULL, 'H'},
        {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = cli_getopt(argc, argv, ":", longopts)) != -1) {
        switch (c) {
        case 'g':
            CLI_TRY(cli_parse_u64(name, "--generate", optarg, 1, 100000, false, &v));
            o->generate = (uint32_t)v;
            break;
        case 's':
            CLI_TRY(cli_parse_seed(name, optarg, &s->seed));
            o->seed_given = true;
            break;
        case 'f':
            CLI_TRY(cli_parse_u64(name, "--fps", optarg, 1, 1000, false, &v));
            s->fps = (unsigned)v;
            break;
        case 'F':
            CLI_TRY(cli_parse_u64(name, "--frames", optarg, 2, 1000000, false, &v));
            s->frames = (unsigned)v;
            break;
        case 'D':
            CLI_TRY(cli_parse_u64(name, "--draw-ms", optarg, 0, 1000, false, &v));
            o->draw_ms = (double)v;
            break;
        case 'b':
            CLI_TRY(cli_parse_u64(name, "--background", optarg, 0, 100000, false, &v));
            s->background = (unsigned)v;
            break;
        case 'j':
            CLI_TRY(cli_parse_jobs(name, optarg, &s->jobs));
            break;
        case 'm':
            CLI_TRY(parse_modes(name, optarg, o->want));
            break;
        case 'W':
            o->warm = false;
            break;
        case 'P':
            s->same_priority = true;
            break;
        case 'H':
            s->no_hold = true;
            break;
        case 'L':
            CLI_TRY(cli_parse_u64(name, "--shader-lead", optarg, 0, 1000000, false, &v));
            s->lead = (unsigned)v;
            break;
        case 'A':
            if (strcmp(optarg, "parts") != 0 && strcmp(optarg, "link") != 0)
                return cli_usage_error(name, "--ahead: expected parts or link, not '%s'", optarg);
            s->link_ahead = optarg[0] == 'l';
            break;
        case 'd':
            CLI_TRY(cli_parse_device(name, optarg, &s->use_device, &s->device));
            break;
        case 'J':
            o->json = true;
            break;
        case 'h':
            printf(help, name, name, DEFAULT_FPS, DEFAULT_FRAMES, DEFAULT_BACKGROUND);
            return CLI_NEXT_OPTION;
        default:
            return cli_option_error(name, c, argv);
        }
    }
    if (o->generate && optind < argc)
        return cli_usage_error(name, "--generate and archives exclude each other");
    if (!o->generate && optind >= argc)
        return cli_usage_error(name, "expected archives (ARCHIVE.foz|DIR...) or --generate N");
    return KILN_EXIT_OK;
}

/* Runs the chosen modes, each without and with background builds. */
static int run_modes(const struct stutter *s, const struct options *o, struct mode *modes,
                     struct mode_result *res, unsigned *n)
{
    *n = 0;
    for (int k = 0; k < M_KINDS; k++)
        for (int bg = 0; bg < (s->nbg ? 2 : 1); bg++) {
            if (!o->want[k])
                continue;
            modes[*n] = (struct mode){.kind = (enum mode_kind)k, .with_bg = bg == 1};
            if (run_mode(s, modes[*n], o->json, &res[*n]) < 0)
                return KILN_EXIT_FAILED;
            (*n)++;
        }
    return KILN_EXIT_OK;
}

static int stutter_main(struct stutter *s, struct options *o, char **ops, int nops)
{
    CLI_TRY(cli_apply_cache_affinity(s->name));
    if (!o->seed_given && kiln_random_bytes(&s->seed, sizeof(s->seed)) < 0)
        s->seed = kiln_now_ns();
    s->budget_ns = 1000000000ull / s->fps;
    s->draw_ns = o->draw_ms < 0 ? s->budget_ns / 4 : (uint64_t)(o->draw_ms * 1e6);
    if (s->draw_ns >= s->budget_ns)
        return cli_usage_error(s->name, "--draw-ms: %.0f ms leaves nothing of the %.1f ms budget",
                               ms_of(s->draw_ns), ms_of(s->budget_ns));
    struct paths p = {0};
    int ex = o->generate ? KILN_OK : collect_archives(s->name, ops, nops, &p);
    if (ex == KILN_OK && !o->generate && p.n == 0)
        ex = cli_usage_error(s->name, "no archives (*.foz) in the folders given");
    uint64_t t0 = kiln_now_ns();
    if (ex == KILN_OK)
        ex = load_programs(s, o->generate, p.v, p.n);
    else if (ex < 0)
        ex = KILN_EXIT_FAILED;
    for (size_t i = 0; i < p.n; i++)
        free(p.v[i]);
    free(p.v);
    if (ex != KILN_EXIT_OK) {
        free_programs(s);
        return ex;
    }
    double load_secs = cli_seconds(t0, kiln_now_ns());
    if (ex == KILN_EXIT_OK && bench_tmpdir(s->name, "bench-stutter", s->tmp, sizeof(s->tmp)) < 0)
        ex = KILN_EXIT_FAILED;
    struct mode modes[2 * M_KINDS];
    struct mode_result res[2 * M_KINDS];
    struct warm_result warm[2];
    unsigned n = 0;
    if (ex == KILN_EXIT_OK)
        ex = run_modes(s, o, modes, res, &n);
    if (ex == KILN_EXIT_OK && o->warm && run_warm(s, o->json, warm) < 0)
        ex = KILN_EXIT_FAILED;
    struct report rp = {.s = s,
                        .modes = modes,
                        .res = res,
                        .n = n,
                        .warm = o->warm ? warm : NULL,
                        .load_secs = load_secs};
    if (ex == KILN_EXIT_OK)
        (o->json ? print_json : print_text)(&rp);
    if (s->tmp[0] && bench_remove_tree(s->tmp) != 0) {
        cli_error(s->name, "%s: could not remove the temporary folder: %s", s->tmp,
                  strerror(errno));
        ex = ex == KILN_EXIT_OK ? KILN_EXIT_FAILED : ex;
    }
    free_programs(s);
    return ex;
}

int cmd_bench_stutter(int argc, char **argv)
{
    struct stutter s = {.name = argv[0],
                        .fps = DEFAULT_FPS,
                        .frames = DEFAULT_FRAMES,
                        .background = DEFAULT_BACKGROUND};
    struct options o = {.warm = true, .want = {true, true, true}, .draw_ms = -1};
    int ex = parse_options(argc, argv, &s, &o);
    if (ex == CLI_NEXT_OPTION)
        return KILN_EXIT_OK;
    if (ex != KILN_EXIT_OK)
        return ex;
    return stutter_main(&s, &o, argv + optind, argc - optind);
}
